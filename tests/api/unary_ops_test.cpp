// neg abs sign square exp log erf sqrt rsqrt against plain references, with IEEE special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "reference.h"

namespace weft {
namespace {

using UnaryFn = Tensor (*)(const Tensor&, const SourceLocation&);

// Data with the values where implementations go wrong: zeros of both signs, infinities, NaN,
// tiny and huge magnitudes, and the integer extremes.
template <class T>
std::vector<T> unary_data(int64_t n, uint32_t seed) {
  std::vector<T> v;
  if constexpr (std::is_floating_point_v<T>) {
    v = ref::random_values<T>(n, seed, -50, 50);
    const T specials[] = {T(0), -T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::quiet_NaN(), T(1e-30), T(-1e-30), T(1e30), T(1), T(-1),
                          T(0.25), T(89), T(-110), std::numeric_limits<T>::denorm_min()};
    for (size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 7 % v.size()] = specials[i];
  } else {
    v = ref::full_range_values<T>(n, seed);
    const T specials[] = {T(0), T(1), T(-1), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(3)};
    for (size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 7 % v.size()] = specials[i];
  }
  return v;
}

template <class T, class Want>
void check_unary(UnaryFn op, Want want, double rel = 0) {
  uint32_t seed = 100;
  for (const Shape& s : ref::unary_cases()) {
    SCOPED_TRACE("shape " + s.to_string());
    std::vector<T> x = unary_data<T>(s.num_elements(), seed++);
    Tensor out = op(constant(x, s), SourceLocation::current());
    ASSERT_EQ(out.shape(), s);
    ASSERT_EQ(out.dtype(), dtype_v<T>);
    std::vector<T> got = out.to_vector<T>();
    // Results below the smallest normal lose relative precision; allow an absolute slack there.
    double abs = std::is_floating_point_v<T> ? static_cast<double>(std::numeric_limits<T>::min()) : 0;
    int64_t bad = ref::first_failure(s.num_elements(), [&](int64_t i) { return ref::close(got[i], want(x[i]), rel, abs); });
    if (bad >= 0) FAIL() << "f(" << +x[bad] << ") = " << +got[bad] << ", want " << +want(x[bad]);
  }
}

template <class T>
using U = std::make_unsigned_t<T>;

template <class T>
class UnaryOp : public testing::Test {};
using NumericTypes = testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(UnaryOp, NumericTypes);

TYPED_TEST(UnaryOp, Neg) {
  using T = TypeParam;
  check_unary<T>(neg, [](T x) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(U<T>(0) - static_cast<U<T>>(x));
    else return static_cast<T>(-x);
  });
}

TYPED_TEST(UnaryOp, Abs) {
  using T = TypeParam;
  check_unary<T>(abs, [](T x) {
    if constexpr (std::is_integral_v<T>) return x < 0 ? static_cast<T>(U<T>(0) - static_cast<U<T>>(x)) : x;
    else return static_cast<T>(std::fabs(x));
  });
}

TYPED_TEST(UnaryOp, Sign) {
  using T = TypeParam;
  check_unary<T>(sign, [](T x) -> T {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x)) return x;
    return x > 0 ? T(1) : x < 0 ? T(-1) : T(0);
  });
}

TYPED_TEST(UnaryOp, Square) {
  using T = TypeParam;
  check_unary<T>(square, [](T x) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U<T>>(x) * static_cast<U<T>>(x));
    else return static_cast<T>(x * x);
  });
}

template <class T>
class FloatUnaryOp : public testing::Test {};
using FloatTypes = testing::Types<float, double>;
TYPED_TEST_SUITE(FloatUnaryOp, FloatTypes);

// Transcendentals: computed in double (long double for float64) and rounded, within a few ulps.
template <class T>
constexpr double kRel = std::is_same_v<T, float> ? 4e-7 : 4e-16;

TYPED_TEST(FloatUnaryOp, Exp) {
  using T = TypeParam;
  check_unary<T>(exp, [](T x) { return static_cast<T>(std::exp(static_cast<long double>(x))); }, kRel<T>);
}

TYPED_TEST(FloatUnaryOp, Log) {
  using T = TypeParam;
  check_unary<T>(log, [](T x) { return static_cast<T>(std::log(static_cast<long double>(x))); }, kRel<T>);
}

TYPED_TEST(FloatUnaryOp, Erf) {
  using T = TypeParam;
  check_unary<T>(erf, [](T x) { return static_cast<T>(std::erf(static_cast<long double>(x))); }, kRel<T>);
}

TYPED_TEST(FloatUnaryOp, Sqrt) {
  using T = TypeParam;
  check_unary<T>(sqrt, [](T x) { return static_cast<T>(std::sqrt(static_cast<long double>(x))); }, kRel<T>);
}

TYPED_TEST(FloatUnaryOp, Rsqrt) {
  using T = TypeParam;
  check_unary<T>(rsqrt, [](T x) { return static_cast<T>(1.0L / std::sqrt(static_cast<long double>(x))); },
                 2 * kRel<T>);
}

TEST(FloatUnaryOp, HandValues) {
  EXPECT_EQ(exp(constant(0.f)).item<float>(), 1.f);
  EXPECT_EQ(log(constant(1.0)).item<double>(), 0.0);
  EXPECT_EQ(log(constant(0.f)).item<float>(), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(log(constant(-1.f)).item<float>()));
  EXPECT_EQ(sqrt(constant(16.0)).item<double>(), 4.0);
  EXPECT_EQ(rsqrt(constant(0.25f)).item<float>(), 2.f);
  EXPECT_EQ(rsqrt(constant(0.f)).item<float>(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(sign(constant({-3, 0, 9})).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(erf(constant(0.f)).item<float>(), 0.f);
  EXPECT_EQ(erf(constant(std::numeric_limits<float>::infinity())).item<float>(), 1.f);
  EXPECT_EQ(erf(constant(-6.0)).item<double>(), -1.0);
  EXPECT_NEAR(erf(constant(0.5f)).item<float>(), 0.520499877813047f, 6e-8f);
}

}  // namespace
}  // namespace weft
