// float16 and bfloat16 on the CPU (kernels/cpu/via_float32.h): each op computes in float32 and
// rounds its float outputs once, so its result is exactly cast(op(cast(x, float32)), dtype). Here:
// that identity, bit for bit, for every widened family; the same against first-principles rounding
// (tests/half_reference.h) for the correctly rounded operations; autodiff through 16-bit ops; and
// that an op still limited to wider dtypes refuses float16 naming itself. The eager-vs-traced
// suites (eager_vs_traced_*_test.cpp) run every dtype an op has a CPU kernel for, so they cover the
// 16-bit kernels too; SixteenBitKernelsReachTheEagerVsTracedSuites checks that they are there.
#include "api/dispatch.h"
#include "eager_vs_traced.h"
#include "elementwise_ops.h"
#include "half_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace weft {
namespace {

using namespace eager_vs_traced;

constexpr DType kSixteen[] = {float16, bfloat16};

// The ops besides the plain elementwise ones (tests/elementwise_ops.h, which come from the
// registry) that take float16 and bfloat16 on the CPU through float32, all of which CUDA registers
// 16-bit kernels for.
const char* const kWidened[] = {"Select",  "Softmax",     "LogSoftmax", "Sum",   "Mean",
                                "Max",     "Min",         "ArgMax",     "MatMul", "FusedMatMul",
                                "SparseSoftmaxCrossEntropyWithLogits"};

TEST(HalfOps, SixteenBitKernelsReachTheEagerVsTracedSuites) {
  std::vector<std::string> names(std::begin(kWidened), std::end(kWidened));
  for (const test_ops::ElementwiseOp& op : test_ops::elementwise_ops()) names.push_back(op.def->name);
  for (const std::string& name : names) {
    const std::vector<DType> dtypes = dtypes_with_kernel(name);
    for (DType dt : kSixteen) {
      EXPECT_NE(std::find(dtypes.begin(), dtypes.end(), dt), dtypes.end()) << name << " " << dtype_name(dt);
      // Where CUDA is built in, the GPU has them too: the definitions now let 16-bit reach them.
      if (has_kernel(op_def(name), DeviceType::CUDA, float32)) {
        EXPECT_TRUE(has_kernel(op_def(name), DeviceType::CUDA, dt)) << name << " " << dtype_name(dt) << " on CUDA";
      }
    }
  }
}

// One op over its tensor inputs, and the inputs to try it on (16-bit, made by `make`).
struct Case {
  const char* name;
  Op fn;
  std::function<std::vector<Tensor>(DType, uint32_t)> make;
};

// The bit patterns of a 16-bit tensor.
std::vector<uint16_t> bits16(const Tensor& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.size()));
  if (!v.empty()) t.copy_to_host(v.data());
  return v;
}

Tensor widen(const Tensor& x) { return is_floating(x.dtype()) && dtype_size(x.dtype()) == 2 ? cast(x, float32) : x; }

// The identity the adapter promises, bit for bit: op on 16-bit inputs == op on their float32
// values, each float output rounded to the 16-bit dtype.
void expect_rounded_float32(const Case& c, DType dt, uint32_t seed) {
  const std::vector<Tensor> in = c.make(dt, seed);
  std::vector<Tensor> wide;
  for (const Tensor& x : in) wide.push_back(widen(x));
  const Tensor got = c.fn(in);
  Tensor want = c.fn(wide);
  if (want.dtype() == float32) want = cast(want, dt);
  std::string what = std::string(c.name) + " " + std::string(dtype_name(dt));
  for (const Tensor& x : in) what += " " + x.shape().to_string();
  expect_same_bits(want, got, what);
}

std::function<std::vector<Tensor>(DType, uint32_t)> unary_inputs(double lo, double hi) {
  return [lo, hi](DType dt, uint32_t seed) {
    std::vector<Tensor> v;
    for (const Shape& s : ref::unary_cases()) v.push_back(sample(dt, s, seed++, lo, hi));
    return v;
  };
}

// Every plain elementwise op of the registry (tests/elementwise_ops.h): a new one is checked here
// without a line of its own. Unary operands are drawn from the range below (the default spans
// float16's finite values); binary ones from a narrow range, so that comparisons meet equal
// values, with the specials bringing zeros, infinities, NaN, a subnormal and float16's largest
// value (whose sums and products overflow).
using test_ops::ElementwiseOp;
std::string case_name(const testing::TestParamInfo<ElementwiseOp>& info) { return info.param.def->display; }
Op through_dispatch(const OpDef& def) {
  return [&def](const std::vector<Tensor>& in) { return dispatch1(def, in); };
}
std::pair<double, double> unary_range(const std::string& op) {
  if (op == "Sign") return {-3, 3};
  if (op == "Square") return {-300, 300};
  if (op == "Exp") return {-12, 12};
  if (op == "Log" || op == "Sqrt" || op == "Rsqrt") return {-1, 3e4};  // a few negatives: NaN
  if (op == "Relu" || op == "Sigmoid") return {-10, 10};
  if (op == "Tanh" || op == "Erf") return {-5, 5};
  return {-3e4, 3e4};
}

class HalfUnary : public testing::TestWithParam<ElementwiseOp> {};

// Each input set of the case in turn: the unary cases make one tensor per shape.
TEST_P(HalfUnary, EqualsFloat32Rounded) {
  const OpDef& def = *GetParam().def;
  const auto [lo, hi] = unary_range(def.name);
  for (DType dt : kSixteen) {
    const std::vector<Tensor> inputs = unary_inputs(lo, hi)(dt, 1);
    for (const Tensor& x : inputs)
      expect_rounded_float32(
          {def.display.c_str(), through_dispatch(def), [&](DType, uint32_t) { return std::vector<Tensor>{x}; }}, dt, 0);
  }
}
INSTANTIATE_TEST_SUITE_P(Ops, HalfUnary, testing::ValuesIn(test_ops::elementwise_ops(1)), case_name);

class HalfBinary : public testing::TestWithParam<ElementwiseOp> {};

TEST_P(HalfBinary, EqualsFloat32RoundedWithBroadcasting) {
  const ElementwiseOp& c = GetParam();
  const Op op = through_dispatch(*c.def);
  uint32_t seed = 1;
  for (DType dt : kSixteen)
    for (const auto& [sa, sb] : ref::binary_cases(false)) {
      if (!c.broadcasts && sa != sb) continue;
      const Tensor a = sample(dt, sa, seed++, -4, 4), b = sample(dt, sb, seed++, -4, 4);
      expect_rounded_float32({c.def->display.c_str(), op, [&](DType, uint32_t) { return std::vector<Tensor>{a, b}; }},
                             dt, 0);
    }
}
INSTANTIATE_TEST_SUITE_P(Ops, HalfBinary, testing::ValuesIn(test_ops::elementwise_ops(2)), case_name);

// Not circular: +, -, *, / and sqrt of 16-bit values, computed in float32 and rounded once, are the
// correctly rounded 16-bit results (float32 has more than 2p + 2 bits for both formats, so the
// double rounding is harmless), which half_reference.h works out from the exact value.
TEST(HalfOps, CorrectlyRoundedAgainstFirstPrinciples) {
  for (DType dt : kSixteen) {
    const int64_t n = 4096;
    const Tensor a = sample(dt, Shape{n}, 11, -3e4, 3e4, false), b = sample(dt, Shape{n}, 12, -70, 70, false);
    auto value = [dt](uint16_t v) { return dt == float16 ? ref::half_value(v) : ref::bf16_value(v); };
    auto round = [dt](double v) { return dt == float16 ? ref::to_half_bits(v) : ref::to_bf16_bits(v); };
    const std::vector<uint16_t> va = bits16(a), vb = bits16(b);
    struct Check {
      const char* name;
      Tensor got;
      std::function<double(double, double)> exact;
    };
    const Check checks[] = {
        {"add", add(a, b), [](double x, double y) { return x + y; }},
        {"sub", sub(a, b), [](double x, double y) { return x - y; }},
        {"mul", mul(a, b), [](double x, double y) { return x * y; }},
        {"div", div(a, b), [](double x, double y) { return x / y; }},
        {"sqrt", sqrt(abs(a)), [](double x, double) { return std::sqrt(std::fabs(x)); }},
    };
    for (const Check& c : checks) {
      const std::vector<uint16_t> got = bits16(c.got);
      for (int64_t i = 0; i < n; ++i) {
        const double exact = c.exact(value(va[i]), value(vb[i]));
        if (std::isnan(exact)) continue;
        ASSERT_EQ(got[i], round(exact)) << c.name << " " << dtype_name(dt) << " of " << value(va[i]) << " and "
                                        << value(vb[i]) << " (element " << i << ")";
      }
    }
  }
}

TEST(HalfOps, WhereEqualsFloat32Rounded) {
  const Op op = [](const std::vector<Tensor>& x) { return where(x[0], x[1], x[2]); };
  uint32_t seed = 1;
  for (DType dt : kSixteen)
    for (const auto& [sa, sb] : ref::binary_cases(false)) {
      const std::vector<Tensor> in = {sample(bool_, sa, seed++, 0, 1), sample(dt, sb, seed++, -100, 100),
                                      sample(dt, sa, seed++, -100, 100)};
      expect_rounded_float32({"where", op, [&](DType, uint32_t) { return in; }}, dt, 0);
    }
}

// Reductions accumulate in float32 and round once, so a 16-bit sum of many terms is as accurate as
// float32's, rounded: not the 16-bit running sum that stalls once the total dwarfs each term.
TEST(HalfOps, ReductionsEqualFloat32Rounded) {
  using Reduce = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool, const SourceLocation&);
  const std::pair<const char*, Reduce> reductions[] = {
      {"reduce_sum", reduce_sum}, {"reduce_mean", reduce_mean}, {"reduce_max", reduce_max}, {"reduce_min", reduce_min}};
  const std::vector<std::vector<int64_t>> axes = {{}, {0}, {1}, {-1}, {0, 2}};
  uint32_t seed = 1;
  for (DType dt : kSixteen)
    for (const auto& [name, fn] : reductions)
      for (const Shape& s : {Shape{5, 7, 3}, Shape{64, 33, 2}, Shape{2, 1, 4096}})
        for (const auto& ax : axes)
          for (bool keep : {false, true}) {
            const Op op = [fn, ax, keep](const std::vector<Tensor>& x) {
              return fn(x[0], ax, keep, SourceLocation::current());
            };
            const Tensor x = sample(dt, s, seed++, -8, 8, false);
            expect_rounded_float32({name, op, [&](DType, uint32_t) { return std::vector<Tensor>{x}; }}, dt, 0);
          }
  // A sum a 16-bit accumulator would get wrong: 4096 ones in float16 stop growing at 2048.
  EXPECT_EQ(cast(reduce_sum(ones({4096}, float16)), float32).item<float>(), 4096.f);
  EXPECT_EQ(cast(reduce_sum(ones({4096}, bfloat16)), float32).item<float>(), 4096.f);
  for (DType dt : kSixteen) {
    const Tensor x = sample(dt, Shape{9, 13}, seed++, -8, 8, false);
    for (int64_t axis : {0, 1, -1}) {
      const Op op = [axis](const std::vector<Tensor>& v) { return argmax(v[0], axis); };
      expect_rounded_float32({"argmax", op, [&](DType, uint32_t) { return std::vector<Tensor>{x}; }}, dt, 0);
    }
  }
}

TEST(HalfOps, SoftmaxMatMulAndLossEqualFloat32Rounded) {
  uint32_t seed = 1;
  for (DType dt : kSixteen) {
    for (int64_t axis : {0, 1, -1}) {
      const Tensor x = sample(dt, Shape{17, 29}, seed++, -6, 6);
      expect_rounded_float32({"softmax", [axis](const std::vector<Tensor>& v) { return softmax(v[0], axis); },
                              [&](DType, uint32_t) { return std::vector<Tensor>{x}; }},
                             dt, 0);
      expect_rounded_float32({"log_softmax", [axis](const std::vector<Tensor>& v) { return log_softmax(v[0], axis); },
                              [&](DType, uint32_t) { return std::vector<Tensor>{x}; }},
                             dt, 0);
    }
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = sample(dt, ta ? Shape{2, 40, 9} : Shape{2, 9, 40}, seed++, -2, 2, false);
        const Tensor b = sample(dt, tb ? Shape{13, 40} : Shape{40, 13}, seed++, -2, 2, false);
        expect_rounded_float32({"matmul", [ta, tb](const std::vector<Tensor>& v) { return matmul(v[0], v[1], ta, tb); },
                                [&](DType, uint32_t) { return std::vector<Tensor>{a, b}; }},
                               dt, 0);
      }
    // The loss: per-example losses through float32, rounded, then the front-end's mean of those in
    // 16 bits, which rounds once more; so close to float32's, not equal.
    const Tensor logits = sample(dt, Shape{6, 10}, seed++, -4, 4, false);
    const Tensor labels = constant({3, 0, 9, 1, 1, 7});
    const Tensor got = nn::sparse_softmax_cross_entropy(labels, logits);
    const Tensor want = nn::sparse_softmax_cross_entropy(labels, cast(logits, float32));
    EXPECT_EQ(got.dtype(), dt);
    const double w = want.item<float>();
    EXPECT_NEAR(cast(got, float32).item<float>(), w, (dt == float16 ? 1.0 / 256 : 1.0 / 32) * std::max(1.0, std::fabs(w)));
  }
}

// Autodiff through 16-bit ops: the gradient has the input's 16-bit dtype and is close to the
// float32 gradient of the same values. Close, not equal: every op of the backward pass rounds its
// own result to 16 bits, so a few roundings add up (bfloat16 keeps 8 significant bits, float16 11).
struct GradCase {
  const char* name;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  std::vector<Shape> shapes;
  double lo = -2, hi = 2;
};
void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

const GradCase kGrad[] = {
    {"add_broadcast", [](const std::vector<Tensor>& x) { return add(x[0], x[1]); }, {{4, 5}, {5}}},
    {"sub_mul_div", [](const std::vector<Tensor>& x) { return div(mul(sub(x[0], x[1]), x[0]), x[1]); },
     {{3, 4}, {3, 4}}, 0.5, 2},
    {"exp_log_sqrt", [](const std::vector<Tensor>& x) { return add(exp(x[0]), mul(log(x[0]), sqrt(x[0]))); },
     {{6, 3}}, 0.5, 2},
    {"rsqrt_square_abs_neg", [](const std::vector<Tensor>& x) { return neg(mul(rsqrt(abs(x[0])), square(x[0]))); },
     {{7}}, 0.5, 2},
    {"pow", [](const std::vector<Tensor>& x) { return pow(x[0], x[1]); }, {{5}, {5}}, 0.5, 2},
    {"maximum_minimum_where",
     [](const std::vector<Tensor>& x) { return where(greater(x[0], x[1]), maximum(x[0], x[1]), minimum(x[0], x[1])); },
     {{4, 4}, {4, 4}}},
    {"relu_sigmoid_tanh", [](const std::vector<Tensor>& x) { return mul(relu(x[0]), add(sigmoid(x[0]), tanh(x[0]))); },
     {{5, 6}}},
    {"softmax", [](const std::vector<Tensor>& x) { return softmax(x[0], -1); }, {{3, 8}}},
    {"log_softmax", [](const std::vector<Tensor>& x) { return log_softmax(x[0], 0); }, {{6, 4}}},
    {"reductions",
     [](const std::vector<Tensor>& x) {
       return add(add(reduce_sum(x[0], {0}), reduce_mean(x[0], {0})), add(reduce_max(x[0], {0}), reduce_min(x[0], {0})));
     },
     {{6, 5}}},
    {"matmul", [](const std::vector<Tensor>& x) { return relu(matmul(x[0], x[1])); }, {{4, 6}, {6, 3}}},
    {"sparse_cross_entropy",
     [](const std::vector<Tensor>& x) { return nn::sparse_softmax_cross_entropy(constant({1, 0, 4}), x[0]); }, {{3, 5}}},
};

class HalfGradient : public testing::TestWithParam<GradCase> {};

std::vector<Tensor> gradients(const GradCase& c, const std::vector<Tensor>& x, const Tensor& w) {
  GradientTape tape;
  for (const Tensor& t : x) tape.watch(t);
  const Tensor y = reduce_sum(mul(c.f(x), w));
  return tape.gradient(y, x);
}

TEST_P(HalfGradient, SixteenBitGradientNearFloat32) {
  const GradCase& c = GetParam();
  uint32_t seed = 100;
  for (DType dt : kSixteen) {
    std::vector<Tensor> x16, x32;
    for (const Shape& s : c.shapes) {
      x16.push_back(sample(dt, s, seed++, c.lo, c.hi, false));
      x32.push_back(cast(x16.back(), float32));
    }
    const Tensor w16 = sample(dt, c.f(x16).shape(), seed++, 0.5, 1.5, false);
    const std::vector<Tensor> g16 = gradients(c, x16, w16), g32 = gradients(c, x32, cast(w16, float32));
    const double tol = dt == float16 ? 1.0 / (1 << 7) : 1.0 / (1 << 4);
    for (size_t k = 0; k < x16.size(); ++k) {
      const std::string what = std::string(c.name) + " " + std::string(dtype_name(dt)) + " d/d input " + std::to_string(k);
      ASSERT_TRUE(g16[k].defined()) << what;
      EXPECT_EQ(g16[k].dtype(), dt) << what;
      ASSERT_EQ(g16[k].shape(), x16[k].shape()) << what;
      const std::vector<float> got = cast(g16[k], float32).to_vector<float>();
      const std::vector<float> want = cast(cast(g32[k], dt), float32).to_vector<float>();
      // Relative to the gradient's largest element: softmax's gradients cancel to near zero, where
      // an element-wise relative error would mean nothing.
      float scale = 1e-3f;
      for (float v : want) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * scale) << what << " element " << i;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Ops, HalfGradient, testing::ValuesIn(kGrad), [](const auto& info) { return std::string(info.param.name); });

// A 16-bit forward and backward pass, traced against eager, bit for bit: the gradient ops the tape
// adds (unbroadcasting sums, ReluGrad, the softmax backward) run through the same 16-bit kernels
// in both modes.
TEST(HalfOps, GradientEagerVsTraced) {
  uint32_t seed = 1;
  for (DType dt : kSixteen) {
    const Op op = [](const std::vector<Tensor>& in) {
      GradientTape tape;
      tape.watch(in[0]);
      tape.watch(in[1]);
      const Tensor h = relu(add(matmul(in[0], in[1]), in[2]));
      const Tensor y = reduce_mean(log_softmax(mul(h, h), -1));
      const std::vector<Tensor> g = tape.gradient(y, {in[0], in[1]});
      return add(reduce_sum(g[0]), reduce_sum(g[1]));
    };
    const std::vector<Tensor> in = {sample(dt, Shape{5, 7}, seed++, -2, 2, false),
                                    sample(dt, Shape{7, 3}, seed++, -2, 2, false),
                                    sample(dt, Shape{3}, seed++, -1, 1, false)};
    expect_traced_equals_eager(op, in, "", "mlp gradient " + std::string(dtype_name(dt)));
  }
}

// An op with no 16-bit kernels keeps refusing 16-bit inputs before anything runs, naming the op
// and the dtype (and the dtypes it does take).
TEST(HalfOps, FloatOnlyOpRefusesFloat16) {
  const Tensor h = cast(constant({1.f, 2.f, 3.f}), float16);
  const std::string msg = ref::error_message<InvalidArgument>([&] { unsorted_segment_sum(h, constant({0, 1, 0}), 2); });
  EXPECT_TRUE(ref::contains(msg, "[unsorted_segment_sum]")) << msg;
  EXPECT_TRUE(ref::contains(msg, "dtype float16 is not supported")) << msg;
  EXPECT_TRUE(ref::contains(msg, "supported: float32, float64, int32, int64")) << msg;
  const std::string random_msg = ref::error_message<InvalidArgument>([&] { random::normal({2}, 0, 1, 7, bfloat16); });
  EXPECT_TRUE(ref::contains(random_msg, "[random::normal] dtype bfloat16 is not supported")) << random_msg;
}

}  // namespace
}  // namespace weft
