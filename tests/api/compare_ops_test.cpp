// equal not_equal less less_equal greater greater_equal and where, with broadcasting.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "reference.h"

namespace weft {
namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, const SourceLocation&);

// Few distinct values, so that equal elements are common; floats include NaN and both zeros.
template <class T>
std::vector<T> tie_heavy(int64_t n, uint32_t seed) {
  std::vector<T> v = ref::random_values<T>(n, seed, -3, 3);
  if constexpr (std::is_floating_point_v<T>) {
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = std::round(v[i]);
      if (i % 11 == 5) v[i] = std::numeric_limits<T>::quiet_NaN();
      if (i % 13 == 6) v[i] = -T(0);
      if (i % 17 == 7) v[i] = std::numeric_limits<T>::infinity();
    }
  }
  return v;
}

template <class T, class Want>
void check_compare(BinaryFn op, Want want, bool include_large = true) {
  uint32_t seed = 7;
  for (const auto& [sa, sb] : ref::binary_cases(include_large)) {
    SCOPED_TRACE(testing::Message() << "shapes " << sa.to_string() << " and " << sb.to_string());
    std::vector<T> a = tie_heavy<T>(sa.num_elements(), seed++), b = tie_heavy<T>(sb.num_elements(), seed++);
    Tensor out = op(constant(a, sa), constant(b, sb), SourceLocation::current());
    Shape so = *ref::broadcast(sa, sb);
    ASSERT_EQ(out.shape(), so);
    ASSERT_EQ(out.dtype(), bool_);
    std::vector<bool> got = out.to_vector<bool>();
    std::vector<int64_t> ia = ref::source_indices(so, sa), ib = ref::source_indices(so, sb);
    int64_t bad = ref::first_failure(so.num_elements(), [&](int64_t i) { return got[i] == want(a[ia[i]], b[ib[i]]); });
    if (bad >= 0) FAIL() << "element " << bad << ": " << +a[ia[bad]] << " vs " << +b[ib[bad]] << " gave " << got[bad];
  }
}

template <class T>
class CompareOp : public testing::Test {};
using NumericTypes = testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(CompareOp, NumericTypes);

// The references spell out IEEE's rule (every comparison with NaN is false, except !=) instead
// of leaning on the same C++ operators the kernels use.
template <class T>
bool either_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(a) || std::isnan(b);
  else return false;
}
template <class T>
double as_double(T v) { return static_cast<double>(v); }
// int64 values beyond 2^53 do not survive a trip through double; compare them as integers.
template <class T>
int order(T a, T b) {
  if constexpr (std::is_integral_v<T>) return (a > b) - (a < b);
  else return (as_double(a) > as_double(b)) - (as_double(a) < as_double(b));
}

TYPED_TEST(CompareOp, Equal) {
  using T = TypeParam;
  check_compare<T>(equal, [](T a, T b) { return !either_nan(a, b) && order(a, b) == 0; });
}
TYPED_TEST(CompareOp, NotEqual) {
  using T = TypeParam;
  check_compare<T>(not_equal, [](T a, T b) { return either_nan(a, b) || order(a, b) != 0; });
}
TYPED_TEST(CompareOp, Less) {
  using T = TypeParam;
  check_compare<T>(less, [](T a, T b) { return !either_nan(a, b) && order(a, b) < 0; });
}
TYPED_TEST(CompareOp, LessEqual) {
  using T = TypeParam;
  check_compare<T>(less_equal, [](T a, T b) { return !either_nan(a, b) && order(a, b) <= 0; });
}
TYPED_TEST(CompareOp, Greater) {
  using T = TypeParam;
  check_compare<T>(greater, [](T a, T b) { return !either_nan(a, b) && order(a, b) > 0; });
}
TYPED_TEST(CompareOp, GreaterEqual) {
  using T = TypeParam;
  check_compare<T>(greater_equal, [](T a, T b) { return !either_nan(a, b) && order(a, b) >= 0; });
}

TEST(CompareOp, BoolEqualAndNotEqual) {
  // The large cases run the same loops as for the other dtypes; std::vector<bool> makes them slow.
  check_compare<bool>(equal, [](bool a, bool b) { return a == b; }, false);
  check_compare<bool>(not_equal, [](bool a, bool b) { return a != b; }, false);
}

TEST(CompareOp, OrderingOfBoolIsNotSupported) {
  Tensor t = constant({true, false});
  EXPECT_THROW(less(t, t), InvalidArgument);
}

// where(cond, a, b) with all three broadcast together.
struct WhereCase {
  Shape cond, a, b;
};
const WhereCase kWhereCases[] = {
    {{7}, {7}, {7}},           {{}, {}, {}},           {{}, {3}, {3}},          {{5, 1}, {1, 7}, {}},
    {{3, 1, 5}, {1, 4, 1}, {3, 4, 5}}, {{2, 3}, {3}, {2, 1}}, {{0}, {0}, {}},    {{2, 0}, {1}, {2, 1}},
    {{1}, {4, 1}, {1, 5}},     {{33, 17}, {}, {17}},   {{1024, 1}, {1024}, {1024, 1024}},
};

template <class T>
void check_where() {
  uint32_t seed = 50;
  for (const WhereCase& c : kWhereCases) {
    SCOPED_TRACE(c.cond.to_string() + " " + c.a.to_string() + " " + c.b.to_string());
    std::vector<bool> cond = ref::random_values<bool>(c.cond.num_elements(), seed++, 0, 1);
    std::vector<uint8_t> cond_bytes(cond.begin(), cond.end());  // vector<bool> is slow to index
    std::vector<T> a = ref::random_values<T>(c.a.num_elements(), seed++, -100, 100);
    std::vector<T> b = ref::random_values<T>(c.b.num_elements(), seed++, -100, 100);
    Tensor out = where(constant(cond, c.cond), constant(a, c.a), constant(b, c.b));
    Shape so = *ref::broadcast(c.cond, *ref::broadcast(c.a, c.b));
    ASSERT_EQ(out.shape(), so);
    ASSERT_EQ(out.dtype(), dtype_v<T>);
    std::vector<T> got = out.to_vector<T>();
    std::vector<int64_t> ic = ref::source_indices(so, c.cond), ia = ref::source_indices(so, c.a),
                         ib = ref::source_indices(so, c.b);
    int64_t bad = ref::first_failure(so.num_elements(),
                                     [&](int64_t i) { return got[i] == (cond_bytes[ic[i]] ? a[ia[i]] : b[ib[i]]); });
    EXPECT_EQ(bad, -1) << "first wrong element";
  }
}

TEST(Where, AllDTypesAndBroadcasting) {
  check_where<float>();
  check_where<double>();
  check_where<int32_t>();
  check_where<int64_t>();
  check_where<bool>();
}

TEST(Where, Errors) {
  Tensor x = constant({1.f, 2.f, 3.f});
  std::string msg = ref::error_message<InvalidArgument>([&] { where(constant({1, 0, 1}), x, x); });
  EXPECT_TRUE(ref::contains(msg, "[where]") && ref::contains(msg, "bool")) << msg;
  msg = ref::error_message<InvalidArgument>([&] { where(x > 1, x, constant({1, 2, 3})); });
  EXPECT_TRUE(ref::contains(msg, "[where]") && ref::contains(msg, "int32")) << msg;
  msg = ref::error_message<InvalidArgument>([&] { where(constant({true, false}), x, x); });
  EXPECT_TRUE(ref::contains(msg, "[where]") && ref::contains(msg, "(2,)") && ref::contains(msg, "(3,)")) << msg;
}

}  // namespace
}  // namespace weft
