#include <gtest/gtest.h>

#include "gradient_check.h"
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

TEST(MathGradients, FiniteDifferences) {
  expect_gradients_match([](auto& x) { return add(x[0], x[1]); }, {f64({3, 4}, 1), f64({4}, 2)}, 1e-6, 1e-6, "add");
  expect_gradients_match([](auto& x) { return sub(x[0], x[1]); }, {f64({3, 1}, 1), f64({1, 4}, 2)}, 1e-6, 1e-6, "sub");
  expect_gradients_match([](auto& x) { return mul(x[0], x[1]); }, {f64({2, 3}, 1), f64({2, 3}, 2)}, 1e-6, 1e-6, "mul");
  expect_gradients_match([](auto& x) { return div(x[0], x[1]); }, {f64({2, 3}, 1), f64({3}, 2, 0.5, 2)}, 1e-6, 1e-5, "div");
  expect_gradients_match([](auto& x) { return pow(x[0], x[1]); }, {f64({2, 3}, 1, 0.5, 2), f64({2, 3}, 2)}, 1e-6, 1e-5, "pow");
  expect_gradients_match([](auto& x) { return maximum(x[0], x[1]); }, {f64({5}, 1), f64({5}, 2)}, 1e-6, 1e-6, "maximum");
  expect_gradients_match([](auto& x) { return minimum(x[0], x[1]); }, {f64({5}, 1), f64({5}, 2)}, 1e-6, 1e-6, "minimum");
  expect_gradients_match([](auto& x) { return neg(x[0]); }, {f64({4}, 1)}, 1e-6, 1e-6, "neg");
  expect_gradients_match([](auto& x) { return abs(x[0]); }, {f64({4}, 1)}, 1e-6, 1e-6, "abs");
  expect_gradients_match([](auto& x) { return sign(x[0]); }, {f64({4}, 1)}, 1e-6, 1e-6, "sign");
  expect_gradients_match([](auto& x) { return square(x[0]); }, {f64({4}, 1)}, 1e-6, 1e-6, "square");
  expect_gradients_match([](auto& x) { return exp(x[0]); }, {f64({4}, 1)}, 1e-6, 1e-6, "exp");
  expect_gradients_match([](auto& x) { return log(x[0]); }, {f64({4}, 1, 0.5, 2)}, 1e-6, 1e-6, "log");
  expect_gradients_match([](auto& x) { return sqrt(x[0]); }, {f64({4}, 1, 0.5, 2)}, 1e-6, 1e-6, "sqrt");
  expect_gradients_match([](auto& x) { return rsqrt(x[0]); }, {f64({4}, 1, 0.5, 2)}, 1e-6, 1e-6, "rsqrt");
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
