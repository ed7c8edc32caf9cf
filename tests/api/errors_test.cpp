// Bad input throws before any kernel runs, with a message that names the op, the shapes and the
// dtypes. "Before a kernel runs" is checked through the allocator: a failed op must not even
// allocate its output.
#include <gtest/gtest.h>

#include "reference.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

// The InvalidArgument message of f, asserting that f allocated nothing.
template <class F>
std::string rejected_early(F f) {
  int64_t allocs = CpuAllocator::instance().stats().num_allocs;
  std::string msg = ref::error_message<InvalidArgument>(f);
  EXPECT_EQ(CpuAllocator::instance().stats().num_allocs, allocs) << "allocated before failing: " << msg;
  return msg;
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_TRUE(ref::contains(msg, p)) << "'" << p << "' missing from: " << msg;
}

TEST(Errors, ShapesThatDoNotBroadcast) {
  Tensor a = constant({1.f, 2.f, 3.f}), b = constant({1.f, 2.f, 3.f, 4.f});
  expect_mentions(rejected_early([&] { add(a, b); }), {"[add]", "(3,)", "(4,)", "float32"});
  expect_mentions(rejected_early([&] { (void)(a * b); }), {"[mul]", "(3,)", "(4,)"});
  Tensor m = zeros({2, 3}, int64), n = zeros({3, 2}, int64);
  expect_mentions(rejected_early([&] { less(m, n); }), {"[less]", "(2, 3)", "(3, 2)", "int64"});
  Tensor p = zeros({4, 1, 3}), q = zeros({2, 2});
  expect_mentions(rejected_early([&] { maximum(p, q); }), {"[maximum]", "(4, 1, 3)", "(2, 2)"});
  Tensor c = zeros({2}, bool_), x = zeros({3});
  expect_mentions(rejected_early([&] { where(c, x, x); }), {"[where]", "(2,)", "(3,)", "bool"});
}

TEST(Errors, DTypeMismatch) {
  Tensor f = constant({1.f, 2.f}), i = constant({1, 2});
  expect_mentions(rejected_early([&] { add(f, i); }), {"[add]", "float32", "int32", "(2,)"});
  Tensor d = constant({1.0, 2.0}), b = constant({true, false}), c = f > 0;
  expect_mentions(rejected_early([&] { (void)(i - d); }), {"[sub]", "int32", "float64"});
  expect_mentions(rejected_early([&] { equal(f, b); }), {"[equal]", "float32", "bool"});
  expect_mentions(rejected_early([&] { where(c, f, i); }), {"[where]", "float32", "int32"});
}

TEST(Errors, UnsupportedDType) {
  Tensor i = constant({1, 2, 3});
  expect_mentions(rejected_early([&] { exp(i); }), {"[exp]", "int32", "(3,)"});
  expect_mentions(rejected_early([&] { sqrt(i); }), {"[sqrt]", "int32"});
  Tensor b = constant({true});
  expect_mentions(rejected_early([&] { add(b, b); }), {"[add]", "bool"});
  expect_mentions(rejected_early([&] { neg(b); }), {"[neg]", "bool"});
  // float16 has arithmetic (through float32), but not every op takes it.
  Tensor h = cast(constant({1.f}), float16), segment = constant({0});
  expect_mentions(rejected_early([&] { unsorted_segment_sum(h, segment, 1); }), {"[unsorted_segment_sum]", "float16"});
  Tensor u8 = constant(std::vector<uint8_t>{1}, Shape{1});
  expect_mentions(rejected_early([&] { add(u8, u8); }), {"[add]", "uint8"});
}

TEST(Errors, EmptyTensorHandle) {
  Tensor empty, x = constant({1.f});
  expect_mentions(rejected_early([&] { add(empty, x); }), {"[add]", "empty Tensor"});
  expect_mentions(rejected_early([&] { add(x, empty); }), {"[add]", "input 1", "empty Tensor"});
  expect_mentions(rejected_early([&] { exp(empty); }), {"[exp]", "empty Tensor"});
  expect_mentions(rejected_early([&] { cast(empty, float64); }), {"[cast]", "empty Tensor"});
  expect_mentions(rejected_early([&] { where(empty, x, x); }), {"[where]", "empty Tensor"});
  expect_mentions(rejected_early([&] { fill({2}, empty); }), {"[fill]", "empty Tensor"});
  EXPECT_THROW(empty.shape(), InvalidArgument);
  EXPECT_THROW(empty.to_vector<float>(), InvalidArgument);
  EXPECT_FALSE(empty.defined());
}

TEST(Errors, WrongElementTypeOnTheWayOut) {
  Tensor i = constant({1, 2, 3});
  expect_mentions(ref::error_message<InvalidArgument>([&] { i.to_vector<float>(); }), {"to_vector", "float32", "int32"});
  expect_mentions(ref::error_message<InvalidArgument>([&] { i.item<int64_t>(); }), {"item", "int64", "int32"});
  expect_mentions(ref::error_message<InvalidArgument>([&] { i.data<double>(); }), {"float64", "int32"});
  expect_mentions(ref::error_message<InvalidArgument>([&] { constant({true}).to_vector<uint8_t>(); }), {"uint8", "bool"});
}

TEST(Errors, ItemOfNonScalar) {
  expect_mentions(ref::error_message<InvalidArgument>([] { constant({1.f, 2.f, 3.f}).item<float>(); }),
                  {"[item]", "(3,)", "3 elements"});
  expect_mentions(ref::error_message<InvalidArgument>([] { zeros({0}).item<float>(); }), {"[item]", "(0,)"});
  EXPECT_EQ(constant({{4.f}}).item<float>(), 4.f) << "one element of any rank is fine";
}

TEST(Errors, ShapesTooBigToHold) {
  // 2^62 float64 elements: the byte count wraps to 0 in 64 bits; refused instead of overrun.
  std::string msg = ref::error_message<InvalidArgument>([] { zeros({int64_t{1} << 31, int64_t{1} << 31}, float64); });
  EXPECT_TRUE(ref::contains(msg, "(2147483648, 2147483648)")) << msg;
  EXPECT_THROW(ones({int64_t{1} << 40, int64_t{1} << 40}), InvalidArgument);
}

TEST(Errors, ViewAndCastChecks) {
  Tensor x = zeros({2, 3});
  EXPECT_THROW(x.view(Shape{4}), InvalidArgument);
  EXPECT_EQ(x.view(Shape{3, 2}).shape(), (Shape{3, 2}));
  EXPECT_EQ(raw_data(x.view(Shape{6})), raw_data(x));
}

}  // namespace
}  // namespace weft
