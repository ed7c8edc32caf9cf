#include <gtest/gtest.h>

#include "api/dispatch.h"
#include "elementwise_ops.h"
#include "gradient_check.h"
#include "runtime/allocator.h"
#include "weft/weft.h"

namespace weft {
namespace {

TEST(GradientTape, VariableSquared) {
  Variable w(constant({{1.f}}));
  GradientTape tape;
  Tensor loss = w * w;
  Tensor g = tape.gradient(loss, std::vector<Variable>{w})[0];
  EXPECT_EQ(g.shape(), (Shape{1, 1}));
  EXPECT_FLOAT_EQ(g.item<float>(), 2.f);
}

TEST(GradientTape, NonPersistentAnswersOnce) {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  EXPECT_DOUBLE_EQ(tape.gradient(y, x).item<double>(), 6.0);
  EXPECT_THROW(tape.gradient(y, x), FailedPrecondition);
}

TEST(GradientTape, PersistentAnswersMany) {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor z = y * x;
  EXPECT_DOUBLE_EQ(tape.gradient(y, x).item<double>(), 6.0);
  EXPECT_DOUBLE_EQ(tape.gradient(z, x).item<double>(), 27.0);
}

TEST(GradientTape, UnconnectedSourceGetsZeros) {
  Tensor x = constant({1.0, 2.0});
  Tensor u = constant({{1.0, 2.0, 3.0}});
  GradientTape tape;
  tape.watch(x);
  tape.watch(u);
  Tensor y = reduce_sum(x * 2.0);
  auto g = tape.gradient(y, std::vector<Tensor>{x, u});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2, 2}));
  EXPECT_EQ(g[1].shape(), u.shape());
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

TEST(GradientTape, SecondOrderWithNestedTapes) {
  Tensor x = constant(2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dy;
  {
    GradientTape inner;
    inner.watch(x);
    Tensor y = x * x * x;           // y' = 3x^2 = 12, y'' = 6x = 12
    dy = inner.gradient(y, x);
  }
  EXPECT_DOUBLE_EQ(dy.item<double>(), 12.0);
  EXPECT_DOUBLE_EQ(outer.gradient(dy, x).item<double>(), 12.0);
}

TEST(GradientTape, StopGradientBlocks) {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * stop_gradient(x);
  EXPECT_DOUBLE_EQ(tape.gradient(y, x).item<double>(), 2.0);
}

TEST(GradientTape, NonTrainableVariableNotWatched) {
  Variable v(constant(1.0), "frozen", /*trainable=*/false);
  GradientTape tape;
  Tensor y = v * 3.0;
  EXPECT_DOUBLE_EQ(tape.gradient(y, v).item<double>(), 0.0);
}

TEST(GradientTape, FreesMemoryAfterGradient) {
  auto& alloc = CpuAllocator::instance();
  Variable w(random::normal({64, 32}, 0, 1, 1), "w");
  Tensor x = random::normal({16, 64}, 0, 1, 2);
  optim::SGD sgd(0.1);
  auto step = [&] {
    GradientTape tape;
    Tensor loss = reduce_mean(square(relu(matmul(x, w))));
    auto g = tape.gradient(loss, std::vector<Variable>{w});
    sgd.apply_gradients(g, {w});
  };
  step();
  int64_t baseline = alloc.stats().bytes_in_use;
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(alloc.stats().bytes_in_use, baseline);
}

using testing::expect_gradients_match;

Tensor f64(const Shape& s, int64_t seed, double lo = -1, double hi = 1) { return random::uniform(s, lo, hi, seed, float64); }

// Every differentiable plain elementwise op of the registry (tests/elementwise_ops.h), so an op
// added to kernels/defs with a gradient is checked without a line of its own; the table keeps
// operands in an op's domain and says where the finite differences need a looser tolerance.
// Binary operands broadcast on both sides where the op broadcasts.
TEST(MathGradients, EveryDifferentiableElementwiseOp) {
  struct Domain {
    double lo = -1, hi = 1, b_lo = -1, b_hi = 1, tol = 1e-6;
  };
  auto domain_of = [](const std::string& op) -> Domain {
    if (op == "Log" || op == "Sqrt" || op == "Rsqrt") return {0.5, 2};
    if (op == "Div") return {-1, 1, 0.5, 2, 1e-5};
    if (op == "Pow") return {0.5, 2, -1, 1, 1e-5};
    return {};
  };
  int checked = 0;
  for (const test_ops::ElementwiseOp& c : test_ops::elementwise_ops()) {
    const OpDef& def = *c.def;
    if (def.has(kNotDifferentiable)) continue;
    const Domain d = domain_of(def.name);
    const Shape sa = c.broadcasts && c.arity == 2 ? Shape{3, 1} : Shape{2, 3};
    const Shape sb = c.broadcasts ? Shape{1, 4} : Shape{2, 3};
    const Tensor a = f64(sa, 1, d.lo, d.hi);
    const std::vector<Tensor> in =
        c.arity == 2 ? std::vector<Tensor>{a, f64(sb, 2, d.b_lo, d.b_hi)} : std::vector<Tensor>{a};
    expect_gradients_match([&def](auto& x) { return dispatch1(def, x); }, in, 1e-6, d.tol, def.display);
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(MathGradients, WhereAndCastFiniteDifferences) {
  expect_gradients_match([](auto& x) { return where(greater(x[0], 0.0), x[0], x[1]); }, {f64({6}, 1), f64({6}, 2)},
                         1e-6, 1e-6, "where");
  expect_gradients_match([](auto& x) { return cast(cast(x[0], float32), float64); }, {f64({4}, 1)}, 1e-3, 1e-4,
                         "cast");
}

TEST(LinalgGradients, MatmulAllTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape sa = ta ? Shape{4, 3} : Shape{3, 4};
      Shape sb = tb ? Shape{5, 4} : Shape{4, 5};
      expect_gradients_match([&](auto& x) { return matmul(x[0], x[1], ta, tb); }, {f64(sa, 1), f64(sb, 2)}, 1e-6, 1e-6,
                             "matmul");
    }
  expect_gradients_match([](auto& x) { return matmul(x[0], x[1]); }, {f64({2, 3, 4}, 1), f64({4, 2}, 2)}, 1e-6, 1e-6,
                         "batched matmul with a broadcast operand");
}

}  // namespace
}  // namespace weft
