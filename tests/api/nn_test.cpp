// relu / sigmoid / tanh / softmax / log_softmax against naive loops in double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace weft {
namespace {

template <class T>
std::vector<T> random_values(int64_t n, uint32_t seed, double scale) {
  std::mt19937 gen(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(-scale, scale);
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

template <class T>
class ReluTyped : public ::testing::Test {};
using NumericTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(ReluTyped, NumericTypes);

TYPED_TEST(ReluTyped, MatchesReference) {
  using T = TypeParam;
  for (int64_t n : std::vector<int64_t>{1, 7, 33 * 17, int64_t{1} << 20}) {
    const std::vector<T> v = random_values<T>(n, 1, 10);
    const Tensor y = relu(constant(v));
    EXPECT_EQ(y.dtype(), dtype_v<T>);
    const std::vector<T> got = y.template to_vector<T>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], v[i] > 0 ? v[i] : T(0)) << "n " << n << " at " << i;
  }
}

TEST(Relu, KeepsShapeAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor y = relu(constant({{-1.f, 2.f, nan}, {0.f, -0.5f, 3.f}}));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  const auto v = y.to_vector<float>();
  EXPECT_EQ(v[0], 0.f);
  EXPECT_EQ(v[1], 2.f);
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_EQ(v[4], 0.f);
}

template <class T>
class FloatTyped : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FloatTyped, FloatTypes);

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-6 : 1e-14;
}

TYPED_TEST(FloatTyped, SigmoidAndTanhMatchReference) {
  using T = TypeParam;
  for (int64_t n : std::vector<int64_t>{1, 7, 33 * 17, int64_t{1} << 20}) {
    const std::vector<T> v = random_values<T>(n, 2, 30);
    const auto s = sigmoid(constant(v)).template to_vector<T>();
    const auto t = tanh(constant(v)).template to_vector<T>();
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(v[i]);
      ASSERT_NEAR(s[i], 1 / (1 + std::exp(-x)), tolerance<T>()) << x;
      ASSERT_NEAR(t[i], std::tanh(x), tolerance<T>()) << x;
    }
  }
}

TYPED_TEST(FloatTyped, SigmoidIsStableForLargeMagnitudes) {
  using T = TypeParam;
  const auto s = sigmoid(constant(std::vector<T>{100, -100, 1000, -1000, 0}, Shape{5})).template to_vector<T>();
  for (T e : s) EXPECT_FALSE(std::isnan(e));
  EXPECT_EQ(s[0], T(1));
  EXPECT_GT(s[1], T(0));  // exp(-100) is representable (as a subnormal in float32)
  const double rel = std::is_same_v<T, float> ? 5e-2 : 1e-12;
  EXPECT_NEAR(static_cast<double>(s[1]) / std::exp(-100.0), 1.0, rel);
  EXPECT_EQ(s[2], T(1));
  EXPECT_EQ(s[3], T(0));
  EXPECT_EQ(s[4], T(0.5));
  const auto t = tanh(constant(std::vector<T>{100, -100, 1000}, Shape{3})).template to_vector<T>();
  EXPECT_EQ(t, (std::vector<T>{1, -1, 1}));
}

// Softmax (or log-softmax) along `axis` of a dense array, in double.
template <class T>
std::vector<double> softmax_reference(const std::vector<T>& x, const std::vector<int64_t>& dims, int64_t axis,
                                      bool log) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dims[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= dims[i];
  const int64_t n = dims[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(x[at(j)]));
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += std::exp(static_cast<double>(x[at(j)]) - m);
      for (int64_t j = 0; j < n; ++j) {
        const double shifted = static_cast<double>(x[at(j)]) - m;
        y[at(j)] = log ? shifted - std::log(s) : std::exp(shifted) / s;
      }
    }
  return y;
}

template <class T>
void check_softmax(const std::vector<int64_t>& dims, int64_t axis, double scale) {
  SCOPED_TRACE("shape " + Shape(dims).to_string() + " axis " + std::to_string(axis));
  const std::vector<T> v = random_values<T>(product(dims), 4, scale);
  const Tensor x = constant(v, Shape(dims));
  for (bool log : {false, true}) {
    const Tensor y = log ? log_softmax(x, axis) : softmax(x, axis);
    EXPECT_EQ(y.shape(), Shape(dims));
    EXPECT_EQ(y.dtype(), dtype_v<T>);
    const std::vector<T> got = y.template to_vector<T>();
    const std::vector<double> want = softmax_reference(v, dims, axis, log);
    const double tol = (log ? 4 : 1) * tolerance<T>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << (log ? "log_softmax" : "softmax") << " at " << i;
  }
}

TYPED_TEST(FloatTyped, SoftmaxEveryAxis) {
  using T = TypeParam;
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{3, 1, 5}, {4, 7, 33}, {2, 33, 17}})
    for (int64_t axis = -3; axis < 3; ++axis) check_softmax<T>(dims, axis, 5);
  check_softmax<T>({1}, 0, 5);
  check_softmax<T>({7}, -1, 5);
  check_softmax<T>({33, 17}, 0, 5);
  check_softmax<T>({33, 17}, 1, 50);
  check_softmax<T>({3, 1000, 2}, 1, 50);  // a narrow tile over a long axis
  check_softmax<T>({2, 3, 1100}, 1, 5);   // inner wider than one tile
}

// Short rows take a path of their own (groups of rows, one exponential call per group), and the
// max of a short run is vectorised with an overlapping last vector: every length from 1 to 70,
// with the largest element at the start, the end and in between.
TYPED_TEST(FloatTyped, SoftmaxShortRowsOfEveryLength) {
  using T = TypeParam;
  for (int64_t n = 1; n <= 70; ++n) check_softmax<T>({5, n}, -1, 3);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33}) {
    for (int64_t at = 0; at < n; ++at) {
      std::vector<T> row(static_cast<size_t>(n), T(-1));
      row[static_cast<size_t>(at)] = T(50);
      const Tensor x = constant(row, Shape{1, n});
      EXPECT_EQ(reduce_max(x).template item<T>(), T(50)) << n << " " << at;
      const std::vector<T> y = softmax(x).template to_vector<T>();
      EXPECT_NEAR(y[static_cast<size_t>(at)], 1.0, 1e-6) << n << " " << at;
      row[static_cast<size_t>(at)] = std::numeric_limits<T>::quiet_NaN();
      EXPECT_TRUE(std::isnan(reduce_max(constant(row, Shape{1, n})).template item<T>())) << n << " " << at;
    }
  }
}

TYPED_TEST(FloatTyped, SoftmaxLargeInputs) {
  using T = TypeParam;
  check_softmax<T>({1024, 1024}, -1, 10);
  check_softmax<T>({1024, 1024}, 0, 10);
  check_softmax<T>({16, 64, 1024}, 1, 10);
  check_softmax<T>({int64_t{1} << 18}, 0, 10);  // one row long enough to be split into blocks
  check_softmax<T>({3, 70001}, -1, 10);
}

TYPED_TEST(FloatTyped, SoftmaxSubtractsTheMax) {
  using T = TypeParam;
  const auto two = [](T a, T b) { return constant(std::vector<T>{a, b}, Shape{2}); };
  EXPECT_EQ(softmax(two(1000, 1000)).template to_vector<T>(), (std::vector<T>{0.5, 0.5}));
  const auto ls = log_softmax(two(1000, 1000)).template to_vector<T>();
  EXPECT_NEAR(ls[0], -std::log(2.0), tolerance<T>());
  EXPECT_NEAR(ls[1], -std::log(2.0), tolerance<T>());
  EXPECT_EQ(softmax(two(-1000, 0)).template to_vector<T>(), (std::vector<T>{0, 1}));
  // log(softmax) would be log(0) = -inf here; log_softmax keeps the exact answer.
  EXPECT_EQ(log_softmax(two(0, -1000)).template to_vector<T>(), (std::vector<T>{0, -1000}));
  // The same along a leading axis (the tile path).
  const Tensor col = constant(std::vector<T>{1000, -1000, 1000, 0}, Shape{2, 2});
  EXPECT_EQ(softmax(col, 0).template to_vector<T>(), (std::vector<T>{0.5, 0, 0.5, 1}));
  const auto lcol = log_softmax(col, 0).template to_vector<T>();
  EXPECT_NEAR(lcol[0], -std::log(2.0), tolerance<T>());
  EXPECT_EQ(lcol[1], T(-1000));
  EXPECT_EQ(lcol[3], T(0));
}

TEST(Softmax, DefaultAxisIsLastAndRowsSumToOne) {
  const Tensor x = constant({{1.f, 2.f, 3.f}, {0.f, 0.f, 0.f}});
  const auto y = softmax(x).to_vector<float>();
  EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, 1e-6);
  EXPECT_NEAR(y[3], 1.0 / 3, 1e-7);
  EXPECT_LT(y[0], y[1]);
  EXPECT_EQ(softmax(x).to_vector<float>(), softmax(x, 1).to_vector<float>());
  EXPECT_EQ(log_softmax(x).to_vector<float>(), log_softmax(x, -1).to_vector<float>());
}

TEST(Softmax, EmptyTensors) {
  EXPECT_EQ(softmax(zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(softmax(zeros({3, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(log_softmax(zeros({2, 0, 4}), 1).shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(sigmoid(zeros({0})).shape(), Shape{0});
}

TEST(Activations, Errors) {
  const Tensor ints = constant({1, 2, 3});
  const Tensor flags = constant(std::vector<bool>{true}, Shape{1});
  expect_invalid([&] { relu(flags); }, {"[relu]", "bool"});
  expect_invalid([&] { sigmoid(ints); }, {"[sigmoid]", "int32"});
  expect_invalid([&] { tanh(constant(std::vector<int64_t>{1}, Shape{1})); }, {"[tanh]", "int64"});
  expect_invalid([&] { softmax(ints); }, {"[softmax]", "int32"});
  expect_invalid([&] { log_softmax(ints); }, {"[log_softmax]", "int32"});
  const Tensor m = zeros({2, 3});
  expect_invalid([&] { softmax(m, 2); }, {"[softmax]", "axis 2", "rank 2"});
  expect_invalid([&] { log_softmax(m, -3); }, {"[log_softmax]", "axis -3", "rank 2"});
  expect_invalid([&] { softmax(constant(1.f)); }, {"[softmax]", "rank 0"});
}

}  // namespace
}  // namespace weft
