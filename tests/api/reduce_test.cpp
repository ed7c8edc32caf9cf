// reduce_sum / reduce_mean / reduce_max / reduce_min / argmax against naive loops in double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace weft {
namespace {

enum class Kind { Sum, Mean, Max, Min };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Sum: return "sum";
    case Kind::Mean: return "mean";
    case Kind::Max: return "max";
    case Kind::Min: return "min";
  }
  return "?";
}

template <class T>
std::vector<T> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(-1, 1);
    for (auto& e : v) e = static_cast<T>(d(gen));
  } else {
    std::uniform_int_distribution<int> d(-50, 50);
    for (auto& e : v) e = static_cast<T>(d(gen));
  }
  return v;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// The reduction done the obvious way: visit every input element, find its output slot.
template <class T>
std::vector<double> reference(const std::vector<T>& x, const std::vector<int64_t>& dims, std::vector<int64_t> axes,
                              Kind kind) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  int64_t out_n = 1, count = 1;
  for (int64_t i = 0; i < rank; ++i) (reduced[i] ? count : out_n) *= dims[i];
  std::vector<double> acc(out_n, 0.0);
  std::vector<bool> seen(out_n, false);
  for (int64_t flat = 0; flat < static_cast<int64_t>(x.size()); ++flat) {
    int64_t rem = flat, out = 0, scale = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rem % dims[d];
      rem /= dims[d];
      if (!reduced[d]) out += c * scale, scale *= dims[d];
    }
    const double v = static_cast<double>(x[flat]);
    double& a = acc[out];
    if (kind == Kind::Sum || kind == Kind::Mean) a += v;
    else if (!seen[out] || std::isnan(v)) a = std::isnan(a) && seen[out] ? a : v;
    else if (!std::isnan(a)) a = kind == Kind::Max ? std::max(a, v) : std::min(a, v);
    seen[out] = true;
  }
  if (kind == Kind::Mean)
    for (double& a : acc) a = std::is_integral_v<T> ? std::trunc(a / count) : a / count;
  return acc;
}

std::vector<int64_t> reduced_shape(const std::vector<int64_t>& dims, std::vector<int64_t> axes, bool keepdims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (!reduced[i]) out.push_back(dims[i]);
    else if (keepdims) out.push_back(1);
  return out;
}

Tensor run(Kind kind, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  switch (kind) {
    case Kind::Sum: return reduce_sum(x, axes, keepdims);
    case Kind::Mean: return reduce_mean(x, axes, keepdims);
    case Kind::Max: return reduce_max(x, axes, keepdims);
    case Kind::Min: return reduce_min(x, axes, keepdims);
  }
  return {};
}

template <class T>
void expect_matches(const std::vector<T>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(static_cast<double>(got[i]))) << "at " << i;
    } else if constexpr (std::is_integral_v<T>) {
      EXPECT_EQ(got[i], static_cast<T>(want[i])) << "at " << i;
    } else {
      EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
    }
  }
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

template <class T>
class ReduceTyped : public ::testing::Test {};
using ReduceTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(ReduceTyped, ReduceTypes);

// Every subset of the three axes, each axis spelled positive and negative, both orders, with and
// without keepdims, over shapes with size-1 and odd dims.
TYPED_TEST(ReduceTyped, EveryAxisCombinationOfRankThree) {
  using T = TypeParam;
  const std::vector<std::vector<int64_t>> shapes = {{3, 1, 5}, {4, 7, 33}, {1, 1, 1}, {2, 33, 17}};
  for (const auto& dims : shapes) {
    const std::vector<T> values = random_values<T>(product(dims), 7);
    const Tensor x = constant(values, Shape(dims));
    std::vector<std::vector<int64_t>> axis_sets = {{}};
    for (int mask = 1; mask < 8; ++mask)
      for (int sign = 0; sign < 8; ++sign) {
        if (sign & ~mask) continue;
        std::vector<int64_t> axes;
        for (int a = 0; a < 3; ++a)
          if (mask & (1 << a)) axes.push_back((sign & (1 << a)) ? a - 3 : a);
        axis_sets.push_back(axes);
        if (axes.size() > 1) axis_sets.push_back({axes.rbegin(), axes.rend()});
      }
    for (Kind kind : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min})
      for (const auto& axes : axis_sets)
        for (bool keepdims : {false, true}) {
          SCOPED_TRACE(std::string(kind_name(kind)) + " shape " + Shape(dims).to_string() + " axes " +
                       Shape(axes).to_string() + (keepdims ? " keepdims" : ""));
          const Tensor y = run(kind, x, axes, keepdims);
          EXPECT_EQ(y.dtype(), dtype_v<T>);
          EXPECT_EQ(y.shape(), Shape(reduced_shape(dims, axes, keepdims)));
          expect_matches(y.template to_vector<T>(), reference(values, dims, axes, kind), tolerance<T>());
        }
  }
}

TYPED_TEST(ReduceTyped, OddRanksAndSizes) {
  using T = TypeParam;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {}},          {{7}, {}},          {{7}, {0}},           {{33, 17}, {0}},      {{33, 17}, {1}},
      {{33, 17}, {}},     {{1, 7}, {0}},      {{7, 1}, {1}},        {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 3}},
      {{2, 3, 4, 5}, {0, 2}}, {{5, 1, 4, 1, 3}, {0, 1, 4}}, {{3, 4, 5, 6}, {0, 1, 2}}, {{1000}, {0}}, {{257}, {}},
  };
  for (const auto& [dims, axes] : cases)
    for (Kind kind : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min}) {
      SCOPED_TRACE(std::string(kind_name(kind)) + " shape " + Shape(dims).to_string() + " axes " +
                   Shape(axes).to_string());
      const std::vector<T> values = random_values<T>(product(dims), 11);
      const Tensor y = run(kind, constant(values, Shape(dims)), axes, false);
      expect_matches(y.template to_vector<T>(), reference(values, dims, axes, kind), tolerance<T>());
    }
}

TYPED_TEST(ReduceTyped, ScalarInput) {
  using T = TypeParam;
  const Tensor x = constant(T(5));
  for (Kind kind : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min}) {
    const Tensor y = run(kind, x, {}, false);
    EXPECT_EQ(y.shape(), Shape{});
    EXPECT_EQ(y.template item<T>(), T(5));
  }
}

TYPED_TEST(ReduceTyped, ArgMaxEveryAxis) {
  using T = TypeParam;
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{3, 1, 5}, {4, 7, 33}, {33, 17, 2}}) {
    const std::vector<T> values = random_values<T>(product(dims), 3);  // ints in [-50, 50] give ties
    const Tensor x = constant(values, Shape(dims));
    for (int64_t axis = -3; axis < 3; ++axis) {
      SCOPED_TRACE("shape " + Shape(dims).to_string() + " axis " + std::to_string(axis));
      const int64_t a = axis < 0 ? axis + 3 : axis;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < a; ++i) outer *= dims[i];
      for (int64_t i = a + 1; i < 3; ++i) inner *= dims[i];
      std::vector<int64_t> want;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          for (int64_t j = 1; j < dims[a]; ++j)
            if (values[(o * dims[a] + j) * inner + i] > values[(o * dims[a] + best) * inner + i]) best = j;
          want.push_back(best);
        }
      const Tensor y = argmax(x, axis);
      EXPECT_EQ(y.dtype(), int64);
      EXPECT_EQ(y.shape(), Shape(reduced_shape(dims, {axis}, false)));
      EXPECT_EQ(y.to_vector<int64_t>(), want);
    }
  }
}

TEST(Reduce, ArgMaxTakesTheFirstOfTiesAndNaN) {
  EXPECT_EQ(argmax(constant({1, 3, 3, 2}), 0).item<int64_t>(), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(constant({1.f, nan, 5.f, nan}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmax(constant({{1.f, 2.f}, {nan, 0.f}, {9.f, nan}}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2}));
}

TEST(Reduce, IntegerMeanTruncatesTowardZero) {
  EXPECT_EQ(reduce_mean(constant({1, 2})).item<int32_t>(), 1);
  EXPECT_EQ(reduce_mean(constant({-1, -2})).item<int32_t>(), -1);
  EXPECT_EQ(reduce_mean(constant({{1, 2, 4}, {-7, 0, 0}}), {1}).to_vector<int32_t>(), (std::vector<int32_t>{2, -2}));
  EXPECT_EQ(reduce_mean(constant(std::vector<int64_t>{5, 6, 6}, Shape{3})).item<int64_t>(), 5);
}

TEST(Reduce, IntegerSumsWrapAround) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(reduce_sum(constant({big, 1})).item<int32_t>(), std::numeric_limits<int32_t>::min());
}

TEST(Reduce, EmptyReductions) {
  EXPECT_EQ(reduce_sum(zeros({0})).item<float>(), 0.f);
  EXPECT_TRUE(std::isnan(reduce_mean(zeros({0})).item<float>()));
  EXPECT_TRUE(std::isnan(reduce_mean(zeros({0}, float64)).item<double>()));
  EXPECT_EQ(reduce_mean(zeros({0}, int32)).item<int32_t>(), 0);
  EXPECT_EQ(reduce_sum(zeros({3, 0}, int64), {1}).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  Tensor keep = reduce_sum(zeros({3, 0}), {1}, true);
  EXPECT_EQ(keep.shape(), (Shape{3, 1}));
  // Reducing a non-empty axis of an empty tensor is fine even without an identity.
  EXPECT_EQ(reduce_max(zeros({0, 3}), {1}).shape(), Shape{0});
  EXPECT_EQ(reduce_sum(zeros({0, 3}), {1}).shape(), Shape{0});
  EXPECT_EQ(argmax(zeros({0, 3}), 1).shape(), Shape{0});
}

TEST(Reduce, NaNPropagatesThroughMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Positions inside the SIMD lanes, in the tail, first and last, for long and short runs.
  for (int64_t n : std::vector<int64_t>{1, 5, 16, 17, 100, 4099, 70000}) {
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> v = random_values<float>(n, 5);
      v[pos] = nan;
      SCOPED_TRACE("n " + std::to_string(n) + " NaN at " + std::to_string(pos));
      EXPECT_TRUE(std::isnan(reduce_max(constant(v)).item<float>()));
      EXPECT_TRUE(std::isnan(reduce_min(constant(v)).item<float>()));
      EXPECT_EQ(argmax(constant(v), 0).item<int64_t>(), pos);
    }
  }
  // Row streaming (reducing the leading axis) and the block path of a long leading axis.
  for (int64_t rows : std::vector<int64_t>{3, 40000}) {
    std::vector<double> v = random_values<double>(rows * 3, 9);
    v[(rows - 1) * 3 + 1] = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = constant(v, Shape{rows, 3});
    const auto mx = reduce_max(x, {0}).to_vector<double>();
    const auto mn = reduce_min(x, {0}).to_vector<double>();
    EXPECT_FALSE(std::isnan(mx[0]));
    EXPECT_TRUE(std::isnan(mx[1]));
    EXPECT_TRUE(std::isnan(mn[1]));
    EXPECT_FALSE(std::isnan(mn[2]));
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(reduce_max(constant({-inf, -inf})).item<float>(), -inf);
  EXPECT_EQ(reduce_min(constant({inf, 1.f, inf})).item<float>(), 1.f);
}

// A plain running float sum of a million values of 0.1 is off in the third digit.
TEST(Reduce, Float32SumIsAccurate) {
  const int64_t n = 1000000;
  std::vector<float> tenth(n, 0.1f);
  const double want = static_cast<double>(n) * static_cast<double>(0.1f);
  EXPECT_NEAR(reduce_sum(constant(tenth)).item<float>(), want, want * 1e-6);
  EXPECT_NEAR(reduce_mean(constant(tenth)).item<float>(), 0.1, 1e-7);

  std::vector<float> v = random_values<float>(n, 13);
  for (float& e : v) e = e + 1.0f;  // all positive: the worst case for accumulated rounding
  double exact = 0;
  for (float e : v) exact += e;
  EXPECT_NEAR(reduce_sum(constant(v)).item<float>(), exact, exact * 1e-6);
  // The same values reduced along a leading axis and as the rows of a matrix.
  const Tensor m = constant(v, Shape{n / 8, 8});
  const auto cols = reduce_sum(m, {0}).to_vector<float>();
  for (int64_t c = 0; c < 8; ++c) {
    double e = 0;
    for (int64_t r = 0; r < n / 8; ++r) e += v[r * 8 + c];
    EXPECT_NEAR(cols[c], e, e * 1e-6) << "column " << c;
  }
}

// 1 << 20 elements: enough to split over the pool and into per-block partials.
TEST(Reduce, LargeInputs) {
  const int64_t n = int64_t{1} << 20;
  const std::vector<float> v = random_values<float>(n, 17);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{n}, {}},         {{1024, 1024}, {0}}, {{1024, 1024}, {1}}, {{n / 2, 2}, {0}},     {{4, n / 4}, {1}},
      {{2, n / 2}, {0}}, {{64, 128, 128}, {0, 2}}, {{16, 256, 256}, {1}}, {{8, 16, 8192}, {0, 1}},
  };
  for (const auto& [dims, axes] : cases)
    for (Kind kind : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min}) {
      SCOPED_TRACE(std::string(kind_name(kind)) + " shape " + Shape(dims).to_string() + " axes " +
                   Shape(axes).to_string());
      const Tensor y = run(kind, constant(v, Shape(dims)), axes, false);
      const std::vector<double> want = reference(v, dims, axes, kind);
      const std::vector<float> got = y.to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LT(worst, kind == Kind::Sum ? 2e-3 : 1e-6);  // sums of up to 2^20 terms of size ~1
    }
  const std::vector<int64_t> iv = random_values<int64_t>(n, 19);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{n}, {1024, 1024}, {n / 4, 4}}) {
    const Tensor x = constant(iv, Shape(dims));
    EXPECT_EQ(reduce_sum(x, {0}).to_vector<int64_t>(),
              [&] {
                std::vector<double> r = reference(iv, dims, {0}, Kind::Sum);
                return std::vector<int64_t>(r.begin(), r.end());
              }())
        << Shape(dims).to_string();
  }
  std::vector<float> peak = v;
  peak[n - 3] = 7.f;
  EXPECT_EQ(argmax(constant(peak), 0).item<int64_t>(), n - 3);
  peak[5] = 7.f;
  EXPECT_EQ(argmax(constant(peak), 0).item<int64_t>(), 5);
  EXPECT_EQ(argmax(constant(peak, Shape{n / 2, 2}), 0).to_vector<int64_t>()[1], 2);
}

// Rows narrower than 256 elements are summed several rows at a time as one wide row (reduce.cpp):
// every remainder of rows against that grouping and against the blocks of rows, and the sums of
// integers (exact), against the plain loops.
TEST(Reduce, NarrowRowsSumAndMeanOverLeadingAxes) {
  for (int64_t c : {2, 3, 6, 7, 100, 255})
    for (int64_t rows : {int64_t{1}, 2 * (256 / c) - 1, 2 * (256 / c), 2 * (256 / c) + 1, 32768 / c + 1, int64_t{40000}}) {
      SCOPED_TRACE("[" + std::to_string(rows) + ", " + std::to_string(c) + "]");
      const std::vector<int64_t> dims = {rows, c};
      const std::vector<float> v = random_values<float>(rows * c, static_cast<uint32_t>(rows + c));
      for (Kind kind : {Kind::Sum, Kind::Mean}) {
        const std::vector<float> got = run(kind, constant(v, Shape(dims)), {0}, false).to_vector<float>();
        const std::vector<double> want = reference(v, dims, {0}, kind);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i])) + (kind == Kind::Sum ? 1e-6 * rows : 0))
              << kind_name(kind) << " column " << i;
      }
      const std::vector<int64_t> iv = random_values<int64_t>(rows * c, 23);
      const std::vector<double> isum = reference(iv, dims, {0}, Kind::Sum);
      EXPECT_EQ(reduce_sum(constant(iv, Shape(dims)), {0}).to_vector<int64_t>(), std::vector<int64_t>(isum.begin(), isum.end()));
    }
}

template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    for (const auto& s : fragments) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception: " << e.what();
  }
}

TEST(Reduce, Errors) {
  const Tensor x = zeros({2, 3, 4});
  expect_invalid([&] { reduce_sum(x, {3}); }, {"[reduce_sum]", "axis 3", "rank 3"});
  expect_invalid([&] { reduce_mean(x, {-4}); }, {"[reduce_mean]", "axis -4", "rank 3"});
  expect_invalid([&] { reduce_max(x, {1, -2}); }, {"[reduce_max]", "repeated", "rank 3"});
  expect_invalid([&] { reduce_min(x, {0, 0}); }, {"[reduce_min]", "axis 0", "repeated"});
  expect_invalid([&] { reduce_sum(constant(1.f), {0}); }, {"[reduce_sum]", "rank 0"});
  expect_invalid([&] { reduce_max(zeros({0})); }, {"[reduce_max]", "empty"});
  expect_invalid([&] { reduce_min(zeros({4, 0}), {1}); }, {"[reduce_min]", "empty"});
  expect_invalid([&] { reduce_max(zeros({0, 0}), {1}); }, {"[reduce_max]", "empty"});
  const Tensor flags = constant(std::vector<bool>{true, false}, Shape{2});
  expect_invalid([&] { reduce_sum(flags); }, {"[reduce_sum]", "bool"});
  expect_invalid([&] { reduce_mean(flags); }, {"[reduce_mean]", "bool"});
  expect_invalid([&] { argmax(flags, 0); }, {"[argmax]", "bool"});
  expect_invalid([&] { argmax(x, 3); }, {"[argmax]", "axis 3", "rank 3"});
  expect_invalid([&] { argmax(x, -4); }, {"[argmax]", "rank 3"});
  expect_invalid([&] { argmax(constant(1.f), 0); }, {"[argmax]", "rank 0"});
  expect_invalid([&] { argmax(zeros({3, 0}), 1); }, {"[argmax]", "empty"});
}

}  // namespace
}  // namespace weft
