// Tensor handles: creation, copies in and out, views, element access, and sizes too big to hold.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "runtime/allocator.h"
#include "runtime/tensor.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

TEST(Tensor, FromHostRoundTrip) {
  const int32_t data[6] = {1, -2, 3, -4, 5, -6};
  Tensor t = Tensor::from_host(int32, Shape{2, 3}, data);
  EXPECT_EQ(t.dtype(), int32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>(data, data + 6)));
  EXPECT_EQ(t.data<int32_t>()[4], 5);
  EXPECT_EQ(t.device(), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(t.device_ptr(), cpu_device());
  EXPECT_FALSE(t.is_symbolic());
  EXPECT_EQ(t.name(), "");
}

TEST(Tensor, HandlesShareAndViewsAlias) {
  const float data[4] = {1, 2, 3, 4};
  Tensor t = Tensor::from_host(float32, Shape{4}, data);
  Tensor copy = t;
  EXPECT_TRUE(copy.same_as(t));
  Tensor v = t.view(Shape{2, 2});
  EXPECT_FALSE(v.same_as(t));
  EXPECT_EQ(raw_data(v), raw_data(t));
  t.data<float>()[3] = 40;
  EXPECT_EQ(v.to_vector<float>()[3], 40);
  EXPECT_THROW(t.view(Shape{3}), InvalidArgument);
  EXPECT_TRUE(t.to(cpu_device()).same_as(t));
  Tensor moved = std::move(copy);
  EXPECT_TRUE(moved.same_as(t));
  EXPECT_FALSE(copy.defined());  // NOLINT(bugprone-use-after-move): moved-from handles are empty
}

TEST(Tensor, BorrowedHandlesCountNoReference) {
  const float data[2] = {1, 2};
  Tensor owner = Tensor::from_host(float32, Shape{2}, data);
  EXPECT_EQ(tensor_impl(owner)->ref_count(), 1);
  Tensor lent = borrowed(owner);
  EXPECT_TRUE(lent.same_as(owner));
  EXPECT_EQ(tensor_impl(owner)->ref_count(), 1);
  EXPECT_EQ(lent.to_vector<float>(), (std::vector<float>{1, 2}));
  {
    Tensor copy = lent;  // a copy made through a borrowed handle is a real reference
    EXPECT_EQ(tensor_impl(owner)->ref_count(), 2);
  }
  EXPECT_EQ(tensor_impl(owner)->ref_count(), 1);
  forget_borrowed(lent);
  EXPECT_FALSE(lent.defined());
  EXPECT_EQ(tensor_impl(owner)->ref_count(), 1);
}

TEST(Tensor, ItemAndBools) {
  const bool bits[3] = {true, false, true};
  Tensor b = Tensor::from_host(bool_, Shape{3}, bits);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  Tensor one = b.view(Shape{3, 1}).view(Shape{3});
  EXPECT_THROW(one.item<bool>(), InvalidArgument);
  const double x = 2.5;
  EXPECT_EQ(Tensor::from_host(float64, Shape{1, 1}, &x).item<double>(), 2.5);
  EXPECT_THROW(Tensor::from_host(float64, Shape{}, &x).item<float>(), InvalidArgument);
}

TEST(Tensor, EmptyAndZeroSized) {
  Tensor z = Tensor::empty(float32, Shape{0, 5});
  EXPECT_EQ(z.size(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  EXPECT_TRUE(z.to_vector<float>().empty());
  EXPECT_THROW(Tensor::empty(float32, Shape{-1, 3}), InvalidArgument);
}

// Sizes whose byte count does not fit in 64 bits must be refused, not wrapped around to a small
// allocation that a kernel would then overrun.
TEST(Tensor, SizesTooBigToHoldAreRefused) {
  EXPECT_THROW(Tensor::empty(float64, Shape{int64_t{1} << 31, int64_t{1} << 31}), InvalidArgument);
  EXPECT_THROW(Tensor::empty(int8, Shape{int64_t{1} << 40, int64_t{1} << 40}), InvalidArgument);
  EXPECT_THROW((Shape{int64_t{1} << 40, int64_t{1} << 40}).num_elements(), InvalidArgument);
  EXPECT_EQ((Shape{int64_t{1} << 40, 0, int64_t{1} << 40}).num_elements(), 0);
}

// An allocation the system refuses leaves the statistics as they were.
TEST(Tensor, FailedAllocationKeepsStats) {
  AllocatorStats before = CpuAllocator::instance().stats();
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer aborts on such a request instead of failing it
  EXPECT_THROW(Tensor::empty(int8, Shape{int64_t{1} << 62}), Unavailable);
#endif
  // 2^64 - 2 bytes: fits a size_t, but rounding it up to a size class or to 64 bytes does not.
  EXPECT_THROW(Tensor::empty(float16, Shape{std::numeric_limits<int64_t>::max()}), Unavailable);
  EXPECT_THROW(CpuAllocator::instance().allocate(SIZE_MAX), Unavailable);
  AllocatorStats after = CpuAllocator::instance().stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.peak_bytes_in_use, before.peak_bytes_in_use);
}

}  // namespace
}  // namespace weft
