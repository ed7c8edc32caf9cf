// add sub mul div pow maximum minimum against plain references, for every numeric dtype and the
// broadcasting corners of reference.h.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <type_traits>

#include "reference.h"

namespace weft {
namespace {

template <class T>
using U = std::make_unsigned_t<T>;
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, const SourceLocation&);

// Runs `op` on every shape pair with data from `gen` and checks each element against `want`.
template <class T, class Gen, class Want>
void check_binary(BinaryFn op, Gen gen, Want want,
                  double rel = 0, double abs = 0, bool include_large = true) {
  uint32_t seed = 1;
  for (const auto& [sa, sb] : ref::binary_cases(include_large)) {
    SCOPED_TRACE(testing::Message() << "shapes " << sa.to_string() << " and " << sb.to_string());
    std::vector<T> a = gen(sa.num_elements(), seed++, 0), b = gen(sb.num_elements(), seed++, 1);
    Tensor out = op(constant(a, sa), constant(b, sb), SourceLocation::current());
    Shape so = *ref::broadcast(sa, sb);
    ASSERT_EQ(out.shape(), so);
    ASSERT_EQ(out.dtype(), dtype_v<T>);
    std::vector<T> got = out.to_vector<T>();
    ASSERT_EQ(static_cast<int64_t>(got.size()), so.num_elements());
    std::vector<int64_t> ia = ref::source_indices(so, sa), ib = ref::source_indices(so, sb);
    int64_t bad = ref::first_failure(so.num_elements(), [&](int64_t i) {
      return ref::close(got[i], want(a[ia[i]], b[ib[i]]), rel, abs);
    });
    if (bad >= 0) {
      T x = a[ia[bad]], y = b[ib[bad]];
      FAIL() << "element " << bad << ": f(" << +x << ", " << +y << ") = " << +got[bad] << ", want " << +want(x, y);
    }
  }
}

// Floats in [-100, 100]; integers over their whole range, so that overflow (wrapping) is exercised.
template <class T>
std::vector<T> wide(int64_t n, uint32_t seed, int) {
  if constexpr (std::is_floating_point_v<T>) return ref::random_values<T>(n, seed, -100, 100);
  else return ref::full_range_values<T>(n, seed);
}

// Small integers (many ties for maximum/minimum); floats from a few values, ties included.
template <class T>
std::vector<T> small(int64_t n, uint32_t seed, int) {
  std::vector<T> v = ref::random_values<T>(n, seed, -4, 4);
  if constexpr (std::is_floating_point_v<T>)
    for (auto& x : v) x = std::round(x * 2) / 2;
  return v;
}

template <class T>
class BinaryOp : public testing::Test {};
using NumericTypes = testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(BinaryOp, NumericTypes);

TYPED_TEST(BinaryOp, Add) {
  using T = TypeParam;
  check_binary<T>(add, wide<T>, [](T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U<T>>(a) + static_cast<U<T>>(b));
    else return static_cast<T>(a + b);
  });
}

TYPED_TEST(BinaryOp, Sub) {
  using T = TypeParam;
  check_binary<T>(sub, wide<T>, [](T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U<T>>(a) - static_cast<U<T>>(b));
    else return static_cast<T>(a - b);
  });
}

TYPED_TEST(BinaryOp, Mul) {
  using T = TypeParam;
  check_binary<T>(mul, wide<T>, [](T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U<T>>(a) * static_cast<U<T>>(b));
    else return static_cast<T>(a * b);
  });
}

TYPED_TEST(BinaryOp, Div) {
  using T = TypeParam;
  // Divisors are never zero here (that is an error for integers, tested on its own).
  auto gen = [](int64_t n, uint32_t seed, int which) {
    if (which == 0) return wide<T>(n, seed, 0);
    std::vector<T> v = ref::random_values<T>(n, seed, 1, 60);
    for (size_t i = 0; i < v.size(); i += 2) v[i] = static_cast<T>(-v[i]);
    return v;
  };
  check_binary<T>(div, gen, [](T a, T b) -> T {
    if constexpr (std::is_integral_v<T>) {
      // Python's floor division: the remainder takes the divisor's sign.
      __int128 q = static_cast<__int128>(a) / b, r = static_cast<__int128>(a) % b;
      if (r != 0 && ((r < 0) != (b < 0))) --q;
      return static_cast<T>(q);
    } else {
      return static_cast<T>(a / b);
    }
  });
}

TYPED_TEST(BinaryOp, Pow) {
  using T = TypeParam;
  if constexpr (std::is_integral_v<T>) {
    auto gen = [](int64_t n, uint32_t seed, int which) {
      return which == 0 ? ref::random_values<T>(n, seed, -12, 12) : ref::random_values<T>(n, seed, 0, 13);
    };
    check_binary<T>(pow, gen, [](T a, T b) {
      U<T> r = 1;  // repeated multiplication, wrapping like the C++ unsigned types
      for (T i = 0; i < b; ++i) r = static_cast<U<T>>(r * static_cast<U<T>>(a));
      return static_cast<T>(r);
    });
  } else {
    auto gen = [](int64_t n, uint32_t seed, int which) {
      return which == 0 ? ref::random_values<T>(n, seed, 0.01, 5) : ref::random_values<T>(n, seed, -4, 4);
    };
    double rel = std::is_same_v<T, float> ? 1e-6 : 1e-14;
    check_binary<T>(
        pow, gen, [](T a, T b) { return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b))); },
        rel);
  }
}

TYPED_TEST(BinaryOp, Maximum) {
  using T = TypeParam;
  check_binary<T>(maximum, small<T>, [](T a, T b) { return a < b ? b : a; });
  check_binary<T>(maximum, wide<T>, [](T a, T b) { return a < b ? b : a; }, 0, 0, false);
}

TYPED_TEST(BinaryOp, Minimum) {
  using T = TypeParam;
  check_binary<T>(minimum, small<T>, [](T a, T b) { return b < a ? b : a; });
  check_binary<T>(minimum, wide<T>, [](T a, T b) { return b < a ? b : a; }, 0, 0, false);
}

TEST(IntegerDiv, FloorsLikePython) {
  // (a, b, a // b in Python)
  const int64_t cases[][3] = {{7, 2, 3},   {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}, {-8, 2, -4}, {8, -2, -4},
                              {0, -3, 0},  {1, 3, 0},   {-1, 3, -1}, {1, -3, -1}, {-6, -3, 2}, {5, 1, 5}};
  for (const auto& c : cases) {
    EXPECT_EQ(div(constant(int32_t(c[0])), constant(int32_t(c[1]))).item<int32_t>(), c[2]) << c[0] << " // " << c[1];
    EXPECT_EQ(div(constant(c[0]), constant(c[1])).item<int64_t>(), c[2]) << c[0] << " // " << c[1];
  }
  // The one quotient that does not fit wraps instead of trapping.
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(div(constant(kMin32), constant(int32_t{-1})).item<int32_t>(), kMin32);
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(div(constant(kMin64), constant(int64_t{-1})).item<int64_t>(), kMin64);
}

TEST(IntegerDiv, ByZeroThrows) {
  for (const auto& [sa, sb] : ref::binary_cases()) {
    int64_t nb = sb.num_elements();
    if (nb == 0 || ref::broadcast(sa, sb)->num_elements() == 0) continue;
    SCOPED_TRACE(sa.to_string() + " // " + sb.to_string());
    std::vector<int32_t> b(static_cast<size_t>(nb), 3);
    b.back() = 0;  // the last element: in the last chunk of a parallel loop
    Tensor a = fill(sa, int32_t{5});
    std::string msg = ref::error_message<InvalidArgument>([&] { div(a, constant(b, sb)); });
    EXPECT_TRUE(ref::contains(msg, "[div]")) << msg;
    EXPECT_TRUE(ref::contains(msg, "division by zero")) << msg;
  }
  EXPECT_THROW(div(constant(int64_t{1}), constant(int64_t{0})), InvalidArgument);
  // Float division by zero is IEEE, not an error.
  std::vector<float> q = div(constant({1.f, -1.f, 0.f}), constant(0.f)).to_vector<float>();
  EXPECT_EQ(q[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(q[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(q[2]));
}

TEST(IntegerPow, HandValuesAndNegativeExponent) {
  EXPECT_EQ(pow(constant(int32_t{0}), constant(int32_t{0})).item<int32_t>(), 1);
  EXPECT_EQ(pow(constant(int32_t{-2}), constant(int32_t{3})).item<int32_t>(), -8);
  EXPECT_EQ(pow(constant(int32_t{-1}), constant(int32_t{1000001})).item<int32_t>(), -1);
  EXPECT_EQ(pow(constant(int32_t{2}), constant(int32_t{31})).item<int32_t>(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(pow(constant(int32_t{2}), constant(int32_t{32})).item<int32_t>(), 0);
  EXPECT_EQ(pow(constant(int64_t{3}), constant(int64_t{39})).item<int64_t>(), 4052555153018976267LL);
  for (DType dt : {int32, int64}) {
    Tensor base = cast(constant({2, 3, 4}), dt);
    Tensor exps = cast(constant({1, -1, 2}), dt);
    std::string msg = ref::error_message<InvalidArgument>([&] { pow(base, exps); });
    EXPECT_TRUE(ref::contains(msg, "[pow]")) << msg;
    EXPECT_TRUE(ref::contains(msg, "negative")) << msg;
  }
}

TEST(IntegerOverflow, Wraps) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(add(constant(kMax), constant(int32_t{1})).item<int32_t>(), kMin);
  EXPECT_EQ(sub(constant(kMin), constant(int32_t{1})).item<int32_t>(), kMax);
  EXPECT_EQ(mul(constant(kMax), constant(int32_t{2})).item<int32_t>(), -2);
  EXPECT_EQ(neg(constant(kMin)).item<int32_t>(), kMin);
  EXPECT_EQ(abs(constant(kMin)).item<int32_t>(), kMin);
  EXPECT_EQ(square(constant(int32_t{65536})).item<int32_t>(), 0);
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(add(constant(kMax64), constant(int64_t{1})).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(mul(constant(int64_t{1} << 62), constant(int64_t{4})).item<int64_t>(), 0);
}

template <class T>
void check_nan_propagation() {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  Tensor a = constant(std::vector<T>{nan, 1, nan, -2}, Shape{4});
  Tensor b = constant(std::vector<T>{1, nan, nan, 5}, Shape{4});
  for (BinaryFn op : {BinaryFn(maximum), BinaryFn(minimum)}) {
    std::vector<T> r = op(a, b, SourceLocation::current()).template to_vector<T>();
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]) && std::isnan(r[2])) << r[0] << " " << r[1] << " " << r[2];
    EXPECT_FALSE(std::isnan(r[3]));
    // NaN as a broadcast scalar, on either side.
    for (T x : op(a, constant(nan), SourceLocation::current()).template to_vector<T>()) EXPECT_TRUE(std::isnan(x));
    for (T x : op(constant(nan), b, SourceLocation::current()).template to_vector<T>()) EXPECT_TRUE(std::isnan(x));
  }
  EXPECT_EQ(maximum(a, b).template to_vector<T>()[3], 5);
  EXPECT_EQ(minimum(a, b).template to_vector<T>()[3], -2);
}

TEST(MaximumMinimum, NaNPropagates) {
  check_nan_propagation<float>();
  check_nan_propagation<double>();
}

}  // namespace
}  // namespace weft
