// Eager against traced, bit for bit, for the elementwise families: every unary op, every binary
// op (arithmetic, comparison, ReluGrad), where, and cast between every pair of dtypes. Each op runs on
// every dtype the CPU has a kernel for, over the shapes of reference.h (scalars, zero-size dims,
// broadcasting on either side, sizes split over the thread pool).
#include "api/dispatch.h"
#include "eager_vs_traced.h"
#include "elementwise_ops.h"

namespace weft {
namespace {

using namespace eager_vs_traced;

// The ops come from the registry (tests/elementwise_ops.h), so a new elementwise op runs here
// without a line of its own; the table below only widens or narrows an op's operand ranges.
using test_ops::ElementwiseOp;
// Names the case in test listings (else gtest prints its bytes, pointers included).
std::string case_name(const testing::TestParamInfo<ElementwiseOp>& info) { return info.param.def->display; }
Op through_dispatch(const OpDef& def) {
  return [&def](const std::vector<Tensor>& in) { return dispatch1(def, in); };
}

// Operand ranges. Floats: `lo`..`hi` for a unary op's operand, -4..4 for a binary op's (so that
// comparisons meet equal values and pow both fractional and negative bases); the specials bring
// zeros, infinities and NaN. Integers: a in [lo, hi] plus the extremes (integer arithmetic wraps
// around); b in [b_lo, b_hi], without extremes or zero where the op cannot take them.
struct Ranges {
  double lo = -1000, hi = 1000;
  double b_lo = -1000, b_hi = 1000;
};
Ranges ranges_of(const ElementwiseOp& c) {
  const std::string& op = c.def->name;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh") return {-30, 30};  // activations: both tails
  if (c.arity == 1) return {-3e4, 3e4};
  if (c.bool_output) return {-3, 3, -3, 3};  // comparisons: equal values are common
  // Integer division by zero is an error, not a value: positive divisors only (both signs of a).
  if (op == "Div") return {-1000, 1000, 1, 40};
  // Integer powers take exponents >= 0 only; small bases keep most results clear of wrapping.
  if (op == "Pow") return {-12, 12, 0, 5};
  return {};
}

class EagerVsTracedUnary : public testing::TestWithParam<ElementwiseOp> {};

TEST_P(EagerVsTracedUnary, EveryDTypeAndShape) {
  const OpDef& def = *GetParam().def;
  const std::vector<DType> dtypes = dtypes_with_kernel(def.name);
  ASSERT_FALSE(dtypes.empty()) << "no CPU kernel of " << def.name;
  const Ranges r = ranges_of(GetParam());
  uint32_t seed = 1;
  for (DType d : dtypes)
    for (const Shape& s : ref::unary_cases())
      expect_traced_equals_eager(through_dispatch(def), {sample(d, s, seed++, r.lo, r.hi)}, def.name,
                                 describe(def.display, d, {s}));
}

INSTANTIATE_TEST_SUITE_P(Ops, EagerVsTracedUnary, testing::ValuesIn(test_ops::elementwise_ops(1)), case_name);

class EagerVsTracedBinary : public testing::TestWithParam<ElementwiseOp> {};

TEST_P(EagerVsTracedBinary, EveryDTypeAndBroadcast) {
  const ElementwiseOp& c = GetParam();
  const OpDef& def = *c.def;
  const std::vector<DType> dtypes = dtypes_with_kernel(def.name);
  ASSERT_FALSE(dtypes.empty()) << "no CPU kernel of " << def.name;
  const Ranges r = ranges_of(c);
  const Op op = through_dispatch(def);
  uint32_t seed = 1;
  for (DType d : dtypes) {
    const bool integer = d != float32 && d != float64 && d != float16 && d != bfloat16;
    for (const auto& [sa, sb] : ref::binary_cases()) {
      if (!c.broadcasts && sa != sb) continue;
      Tensor a = integer ? sample(d, sa, seed++, r.lo, r.hi) : sample(d, sa, seed++, -4, 4);
      Tensor b = integer ? sample(d, sb, seed++, r.b_lo, r.b_hi, false) : sample(d, sb, seed++, -4, 4);
      expect_traced_equals_eager(op, {a, b}, def.name, describe(def.display, d, {sa, sb}));
    }
    if (!c.broadcasts) continue;
    // A number on the right, as in `x + 2`: a constant of the trace rather than an argument.
    Op with_number = [&op](const std::vector<Tensor>& in) { return op({in[0], scalar_like(in[0], 3, "test")}); };
    for (const Shape& s : {Shape{}, Shape{33, 17}})
      expect_traced_equals_eager(with_number, {sample(d, s, seed++, r.lo, r.hi)}, def.name,
                                 describe(def.display, d, {s}) + " and the number 3");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, EagerVsTracedBinary, testing::ValuesIn(test_ops::elementwise_ops(2)), case_name);

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
