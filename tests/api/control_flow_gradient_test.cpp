// Gradients through cond and while_loop: eager (the tape sees the ops that ran) against finite
// differences, and traced (a tape inside weft::function differentiates the If and While nodes)
// against the eager gradient.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

void expect_near(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], y[i], tol * std::max(1.0, std::abs(y[i]))) << what << " [" << i << "]";
}

// Checks d/dx and d/dy of sum(f(x, y) * w): eager against finite differences, and traced (the
// tape inside a weft::function) against eager.
void check_gradients(const Fn2& f, const Tensor& x, const Tensor& y, const std::string& what) {
  weft::testing::expect_gradients_match([&](const std::vector<Tensor>& v) { return f(v[0], v[1]); }, {x, y}, 1e-6,
                                        1e-5, what);
  Tensor w = random::uniform(f(x, y).shape(), 0.5, 1.5, 7, float64);
  std::vector<Tensor> eager;
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(y);
    eager = tape.gradient(reduce_sum(f(x, y) * w), std::vector<Tensor>{x, y});
  }
  auto traced = function([&](Tensor a, Tensor b) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    Tensor value = f(a, b);
    std::vector<Tensor> g = tape.gradient(reduce_sum(value * w), std::vector<Tensor>{a, b});
    return std::vector<Tensor>{value, g[0], g[1]};
  });
  std::vector<Tensor> got = traced(x, y);
  expect_near(got[0], f(x, y), 1e-12, what + " value");
  expect_near(got[1], eager[0], 1e-9, what + " d/dx traced vs eager");
  expect_near(got[2], eager[1], 1e-9, what + " d/dy traced vs eager");
}

TEST(ControlFlowGradients, CondBothBranches) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    return cond(reduce_sum(x) > 0., [&] { return x * x * y; }, [&] { return exp(x) - y * 3.; });
  };
  Tensor y = constant({0.5, -1.5, 2.0});
  check_gradients(f, constant({0.3, 1.2, -0.4}), y, "then branch");
  check_gradients(f, constant({-0.3, -1.2, 0.4}), y, "else branch");
}

TEST(ControlFlowGradients, CondVectorFormWithABranchIgnoringAnInput) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    std::vector<Tensor> r = cond(
        reduce_max(y) > 1., [&]() -> std::vector<Tensor> { return {x * 2., tanh(x)}; },
        [&]() -> std::vector<Tensor> { return {x * y, y}; });
    return r[0] + r[1] * r[1];
  };
  check_gradients(f, constant({0.2, -0.7}), constant({0.4, 1.6}), "then");
  check_gradients(f, constant({0.2, -0.7}), constant({0.4, 0.6}), "else");
}

// x^(2^k): squaring k times in a loop; d/dx = 2^k x^(2^k - 1).
TEST(ControlFlowGradients, RepeatedSquaringInALoop) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    std::vector<Tensor> r = while_loop(
        [](const std::vector<Tensor>& v) { return v[0] < 3; },
        [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, v[1] * v[1]}; },
        {constant(0), x});
    return r[1] + y;
  };
  Tensor x = constant({0.9, 1.1, -0.8});
  check_gradients(f, x, constant({0.0, 0.0, 0.0}), "x^8");
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(reduce_sum(f(x, zeros({3}, float64))), x);
  std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(gs[i], 8 * std::pow(xs[i], 7), 1e-12);
}

// The iteration count depends on the data; y is captured by the body (loop-invariant).
TEST(ControlFlowGradients, LoopWithDataDependentCount) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    return while_loop([](const std::vector<Tensor>& v) { return reduce_sum(v[0]) < 10.; },
                      [&](const std::vector<Tensor>& v) { return v[0] * 1.5 + y * v[0] * v[0]; }, {x})[0];
  };
  Tensor y = constant({0.1, 0.05});
  check_gradients(f, constant({0.4, 0.7}), y, "several iterations");
  check_gradients(f, constant({1.3, 2.1}), y, "fewer iterations");
  check_gradients(f, constant({6.0, 5.0}), y, "no iteration");
}

TEST(ControlFlowGradients, CondInsideALoop) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    return while_loop(
        [](const std::vector<Tensor>& v) { return v[0] < 4; },
        [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
          Tensor next = cond(reduce_sum(v[1]) > 1., [&] { return v[1] * 0.5 + y; }, [&] { return v[1] * v[1] + 1.; });
          return {v[0] + 1, next};
        },
        {constant(0), x})[1];
  };
  check_gradients(f, constant({0.3, 0.2}), constant({0.25, -0.1}), "cond in loop");
}

TEST(ControlFlowGradients, LoopInsideACond) {
  Fn2 f = [](const Tensor& x, const Tensor& y) {
    return cond(
        reduce_sum(y) > 0.,
        [&] {
          return while_loop([](const std::vector<Tensor>& v) { return v[0] < 2; },
                            [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
                              return {v[0] + 1, v[1] * y};
                            },
                            {constant(0), x})[1];
        },
        [&] { return x * 3.; });
  };
  check_gradients(f, constant({0.7, -1.2}), constant({0.6, 1.3}), "loop taken");
  check_gradients(f, constant({0.7, -1.2}), constant({-0.6, 0.3}), "loop not taken");
}

// Variables read inside a branch or loop body become inputs of the If/While node, so a tape
// inside the traced function reaches them.
TEST(ControlFlowGradients, TrainableVariablesReadInsideTracedControlFlow) {
  Variable w(constant({0.5, -0.25}), "w");
  auto loss = [&](const Tensor& x) {
    Tensor y = cond(reduce_sum(x) > 0., [&] { return x * w * w; }, [&] { return x + w; });
    return reduce_sum(while_loop([](const std::vector<Tensor>& v) { return v[0] < 2; },
                                 [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
                                   return {v[0] + 1, v[1] * w + 1.};
                                 },
                                 {constant(0), y})[1]);
  };
  auto traced = function([&](Tensor x) {
    GradientTape tape;
    return tape.gradient(loss(x), w);
  });
  for (const Tensor& x : {constant({1.0, 2.0}), constant({-1.0, -2.0})}) {
    GradientTape tape;
    Tensor eager = tape.gradient(loss(x), w);
    expect_near(traced(x), eager, 1e-12, "d loss / d w");
    EXPECT_NE(eager.to_vector<double>(), (std::vector<double>{0.0, 0.0}));
  }
}

TEST(ControlFlowGradients, SecondOrderThroughCond) {
  auto f = [](const Tensor& x) { return cond(x > 0., [&] { return x * x * x; }, [&] { return -x * x; }); };
  auto traced = function([&](Tensor x) {
    GradientTape outer;
    outer.watch(x);
    GradientTape inner;
    inner.watch(x);
    Tensor dy = inner.gradient(f(x), x);
    return outer.gradient(dy, x);
  });
  EXPECT_NEAR(traced(constant(2.0)).item<double>(), 12.0, 1e-12);  // d2/dx2 x^3 = 6x
  EXPECT_NEAR(traced(constant(-2.0)).item<double>(), -2.0, 1e-12);
}

TEST(ControlFlowGradients, SecondOrderThroughALoop) {
  // x^4 by squaring twice: the While gradient is itself made of While and If nodes, and those are
  // differentiated again.
  auto f = [](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& v) { return v[0] < 2; },
                      [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, v[1] * v[1]}; },
                      {constant(0), x})[1];
  };
  auto traced = function([&](Tensor x) {
    GradientTape outer;
    outer.watch(x);
    GradientTape inner;
    inner.watch(x);
    Tensor dy = inner.gradient(f(x), x);
    return std::vector<Tensor>{dy, outer.gradient(dy, x)};
  });
  for (double x : {0.5, -1.5}) {
    std::vector<Tensor> got = traced(constant(x));
    EXPECT_NEAR(got[0].item<double>(), 4 * x * x * x, 1e-12);
    EXPECT_NEAR(got[1].item<double>(), 12 * x * x, 1e-12);
  }
}

}  // namespace
}  // namespace weft
