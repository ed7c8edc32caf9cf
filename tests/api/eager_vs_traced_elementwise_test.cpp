// Eager against traced, bit for bit, for the elementwise families: every unary op, every binary
// op (arithmetic and comparison), where, and cast between every pair of dtypes. Each op runs on
// every dtype the CPU has a kernel for, over the shapes of reference.h (scalars, zero-size dims,
// broadcasting on either side, sizes split over the thread pool).
#include "eager_vs_traced.h"

namespace weft {
namespace {

using namespace eager_vs_traced;

struct UnaryCase {
  const char* name;
  const char* node;  // the graph op
  Tensor (*fn)(const Tensor&);
};
// Names the case in test listings (else gtest prints its bytes, pointers included).
void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

const UnaryCase kUnary[] = {
    {"neg", "Neg", [](const Tensor& x) { return neg(x); }},
    {"abs", "Abs", [](const Tensor& x) { return abs(x); }},
    {"sign", "Sign", [](const Tensor& x) { return sign(x); }},
    {"square", "Square", [](const Tensor& x) { return square(x); }},
    {"exp", "Exp", [](const Tensor& x) { return exp(x); }},
    {"log", "Log", [](const Tensor& x) { return log(x); }},
    {"erf", "Erf", [](const Tensor& x) { return erf(x); }},
    {"sqrt", "Sqrt", [](const Tensor& x) { return sqrt(x); }},
    {"rsqrt", "Rsqrt", [](const Tensor& x) { return rsqrt(x); }},
};

class EagerVsTracedUnary : public testing::TestWithParam<UnaryCase> {};

TEST_P(EagerVsTracedUnary, EveryDTypeAndShape) {
  const UnaryCase& c = GetParam();
  const std::vector<DType> dtypes = dtypes_with_kernel(c.node);
  ASSERT_FALSE(dtypes.empty()) << "no CPU kernel of " << c.node;
  Op op = [&c](const std::vector<Tensor>& in) { return c.fn(in[0]); };
  uint32_t seed = 1;
  for (DType d : dtypes)
    for (const Shape& s : ref::unary_cases())
      expect_traced_equals_eager(op, {sample(d, s, seed++, -3e4, 3e4)}, c.node, describe(c.name, d, {s}));
}

INSTANTIATE_TEST_SUITE_P(Ops, EagerVsTracedUnary, testing::ValuesIn(kUnary),
                         [](const auto& info) { return std::string(info.param.name); });

struct BinaryCase {
  const char* name;
  const char* node;
  Tensor (*fn)(const Tensor&, const Tensor&);
  // Integer operands: a in [lo, hi] plus the extremes (integer arithmetic wraps around); b in
  // [b_lo, b_hi], without extremes or zero where the op cannot take them.
  double b_lo = -1000, b_hi = 1000;
  double lo = -1000, hi = 1000;
};
// Names the case in test listings (else gtest prints its bytes, pointers included).
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

const BinaryCase kBinary[] = {
    {"add", "Add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
    {"sub", "Sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
    {"mul", "Mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
    // Integer division by zero is an error, not a value: positive divisors only (both signs of a).
    {"div", "Div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, 1, 40},
    // Integer powers take exponents >= 0 only; small bases keep most results clear of wrapping.
    {"pow", "Pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0, 5, -12, 12},
    {"maximum", "Maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
    {"minimum", "Minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
    {"equal", "Equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); }, -3, 3, -3, 3},
    {"not_equal", "NotEqual", [](const Tensor& a, const Tensor& b) { return not_equal(a, b); }, -3, 3, -3, 3},
    {"less", "Less", [](const Tensor& a, const Tensor& b) { return less(a, b); }, -3, 3, -3, 3},
    {"less_equal", "LessEqual", [](const Tensor& a, const Tensor& b) { return less_equal(a, b); }, -3, 3, -3, 3},
    {"greater", "Greater", [](const Tensor& a, const Tensor& b) { return greater(a, b); }, -3, 3, -3, 3},
    {"greater_equal", "GreaterEqual", [](const Tensor& a, const Tensor& b) { return greater_equal(a, b); }, -3, 3,
     -3, 3},
};

class EagerVsTracedBinary : public testing::TestWithParam<BinaryCase> {};

TEST_P(EagerVsTracedBinary, EveryDTypeAndBroadcast) {
  const BinaryCase& c = GetParam();
  const std::vector<DType> dtypes = dtypes_with_kernel(c.node);
  ASSERT_FALSE(dtypes.empty()) << "no CPU kernel of " << c.node;
  Op op = [&c](const std::vector<Tensor>& in) { return c.fn(in[0], in[1]); };
  uint32_t seed = 1;
  for (DType d : dtypes) {
    const bool integer = d != float32 && d != float64 && d != float16 && d != bfloat16;
    for (const auto& [sa, sb] : ref::binary_cases()) {
      // Float operands in a narrow range, so that comparisons meet equal values and pow both
      // fractional and negative bases; the specials bring zeros, infinities and NaN.
      Tensor a = integer ? sample(d, sa, seed++, c.lo, c.hi) : sample(d, sa, seed++, -4, 4);
      Tensor b = integer ? sample(d, sb, seed++, c.b_lo, c.b_hi, false) : sample(d, sb, seed++, -4, 4);
      expect_traced_equals_eager(op, {a, b}, c.node, describe(c.name, d, {sa, sb}));
    }
    // A number on the right, as in `x + 2`: a constant of the trace rather than an argument.
    Op with_number = [&c](const std::vector<Tensor>& in) { return c.fn(in[0], scalar_like(in[0], 3, "test")); };
    for (const Shape& s : {Shape{}, Shape{33, 17}})
      expect_traced_equals_eager(with_number, {sample(d, s, seed++, c.lo, c.hi)}, c.node,
                                 describe(c.name, d, {s}) + " and the number 3");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, EagerVsTracedBinary, testing::ValuesIn(kBinary),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EagerVsTraced, WhereEveryDTypeAndBroadcast) {
  const std::vector<DType> dtypes = dtypes_with_kernel("Select");
  ASSERT_FALSE(dtypes.empty());
  Op op = [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); };
  const std::vector<std::vector<Shape>> shapes = {
      {{7}, {7}, {7}},          {{}, {33, 17}, {33, 17}}, {{33, 17}, {}, {}},         {{5, 1}, {1, 7}, {7}},
      {{3, 1, 5}, {4, 1}, {}},  {{0, 3}, {1, 3}, {3}},    {{2, 1}, {2, 0}, {1}},      {{}, {}, {}},
      {{1024, 1}, {1024}, {1, 1024}}, {{1 << 20}, {1 << 20}, {}},
  };
  uint32_t seed = 1;
  for (DType d : dtypes)
    for (const auto& s : shapes)
      expect_traced_equals_eager(op, {sample(bool_, s[0], seed++, 0, 1), sample(d, s[1], seed++, -100, 100),
                                      sample(d, s[2], seed++, -100, 100)},
                                 "Select", describe("where", d, s));
}

// Every pair of the nine dtypes, on values that reach each conversion's edge cases: NaN and the
// infinities into integers (NaN -> 0, saturation), integers beyond the target's range (modular),
// int64 past 2^53 into the 16-bit floats (rounding to odd), ties of float16 and bfloat16.
class EagerVsTracedCast : public testing::TestWithParam<DType> {};

TEST_P(EagerVsTracedCast, IntoEveryDType) {
  const DType from = GetParam();
  ASSERT_TRUE(find_kernel(op_def("Cast"), DeviceType::CPU, from)) << "no CPU kernel casting from " << dtype_name(from);
  uint32_t seed = 1;
  for (DType to : kAllDTypes) {
    Op op = [to](const std::vector<Tensor>& in) { return cast(in[0], to); };
    for (const Shape& s : {Shape{}, Shape{7}, Shape{33, 17}, Shape{0, 2}, Shape{1 << 18}}) {
      Tensor x = from == int64 ? sample(from, s, seed++, -1e18, 1e18) : sample(from, s, seed++, -7e4, 7e4);
      expect_traced_equals_eager(op, {x}, "Cast",
                                 describe("cast to " + std::string(dtype_name(to)), from, {s}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(From, EagerVsTracedCast, testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace weft
