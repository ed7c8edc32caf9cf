// What a user's program sees: only <weft/weft.h>, as an installed weft gives it. Tensor's state
// and memory are reached through runtime/tensor_internals.h by kernels, never through Tensor's
// public members (scripts/check-public-surface checks the headers it includes).
#include <weft/weft.h>

#include <gtest/gtest.h>

namespace {

template <class T>
concept exposes_impl = requires(const T& t) { t.impl(); };
template <class T>
concept exposes_impl_or_null = requires(const T& t) { t.impl_or_null(); };
template <class T>
concept exposes_raw_data = requires(const T& t) { t.raw_data(); };
template <class T>
concept exposes_borrowing = requires(const T& t) { T::borrowed(t); };
template <class T>
concept exposes_forget_borrowed = requires(T& t) { t.forget_borrowed(); };
template <class T>
concept exposes_cluster_runtime = requires(const T& c) { c.runtime(); };

static_assert(!exposes_impl<weft::Tensor>, "Tensor::impl() is for kernels: runtime/tensor_internals.h");
static_assert(!exposes_impl_or_null<weft::Tensor>, "Tensor::impl_or_null() is for kernels");
static_assert(!exposes_raw_data<weft::Tensor>, "Tensor::raw_data() is for kernels: raw_data(t)");
static_assert(!exposes_borrowing<weft::Tensor>, "borrowed handles are runtime/tensor_lending.h's");
static_assert(!exposes_forget_borrowed<weft::Tensor>, "borrowed handles are runtime/tensor_lending.h's");
static_assert(!exposes_cluster_runtime<weft::Cluster>, "the cluster's runtime is cluster/cluster_placement.h's");

// What API.md lists stays: dtype, shape, rank, size, device, is_symbolic, name, to_vector, item,
// and data<T>() as torch's data_ptr.
TEST(PublicSurface, TensorKeepsTheListedMembers) {
  weft::Tensor t = weft::constant({1.f, 2.f, 3.f});
  EXPECT_EQ(t.dtype(), weft::float32);
  EXPECT_EQ(t.shape(), weft::Shape{3});
  EXPECT_EQ(t.rank(), 1);
  EXPECT_EQ(t.size(), 3);
  EXPECT_FALSE(t.is_symbolic());
  EXPECT_EQ(t.name(), "");
  EXPECT_NE(t.device().find("CPU:0"), std::string::npos);
  EXPECT_EQ(t.data<float>()[1], 2.f);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f}));
  EXPECT_EQ(weft::constant(4.f).item<float>(), 4.f);
}

}  // namespace
