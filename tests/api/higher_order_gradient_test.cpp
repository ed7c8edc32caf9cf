// Second-order gradients through nested tapes: Hessian-vector products of the activations,
// reductions and losses against central differences of the first gradient (float64).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "weft/weft.h"

namespace weft {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// d/dx sum(w * f(x)), recorded by whatever outer tape is active.
Tensor first_gradient(const Fn& f, const Tensor& x, const Tensor& w) {
  GradientTape inner;
  inner.watch(x);
  return inner.gradient(reduce_sum(f(x) * w), x);
}

double dot(const Tensor& a, const Tensor& b) { return reduce_sum(a * b).item<double>(); }

// H v, with H the Hessian of sum(w * f(x)), by nested tapes and by differences of gradients.
void expect_hessian_vector_product_matches(const Fn& f, const Tensor& x, const std::string& what) {
  Tensor w = random::uniform(f(x).shape(), 0.5, 1.5, 77, float64);
  Tensor v = random::uniform(x.shape(), -1, 1, 78, float64);
  Tensor hv;
  {
    GradientTape outer;
    outer.watch(x);
    Tensor g = first_gradient(f, x, w);
    hv = outer.gradient(reduce_sum(g * v), x);
  }
  ASSERT_EQ(hv.shape(), x.shape()) << what;
  std::vector<double> xs = x.to_vector<double>(), got = hv.to_vector<double>();
  const double eps = 1e-5;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto at = [&](double delta) {
      std::vector<double> moved = xs;
      moved[i] += delta;
      return dot(first_gradient(f, constant(moved, x.shape()), w), v);
    };
    double numeric = (at(eps) - at(-eps)) / (2 * eps);
    EXPECT_NEAR(got[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << what << " element " << i;
  }
}

Tensor x64(const Shape& s, int64_t seed) { return random::uniform(s, -1.5, 1.5, seed, float64); }

TEST(HigherOrderGradients, Activations) {
  expect_hessian_vector_product_matches([](const Tensor& x) { return tanh(x); }, x64({2, 3}, 1), "tanh");
  expect_hessian_vector_product_matches([](const Tensor& x) { return sigmoid(x); }, x64({2, 3}, 2), "sigmoid");
  expect_hessian_vector_product_matches([](const Tensor& x) { return x * exp(x); }, x64({4}, 3), "x exp x");
  expect_hessian_vector_product_matches([](const Tensor& x) { return relu(x) * x; }, x64({5}, 4), "relu(x) x");
  expect_hessian_vector_product_matches([](const Tensor& x) { return erf(x); }, x64({2, 3}, 7), "erf");
  expect_hessian_vector_product_matches([](const Tensor& x) { return gelu(x); }, x64({2, 3}, 8), "gelu");
  expect_hessian_vector_product_matches([](const Tensor& x) { return gelu(x, true); }, x64({2, 3}, 9),
                                        "gelu approximate");
  for (int64_t axis : {-1, 0}) {
    std::string a = " axis " + std::to_string(axis);
    expect_hessian_vector_product_matches([axis](const Tensor& x) { return softmax(x, axis); }, x64({3, 4}, 5),
                                          "softmax" + a);
    expect_hessian_vector_product_matches([axis](const Tensor& x) { return log_softmax(x, axis); }, x64({3, 4}, 6),
                                          "log_softmax" + a);
  }
}

TEST(HigherOrderGradients, SumOfAnElementwiseFunction) {
  expect_hessian_vector_product_matches([](const Tensor& x) { return reduce_sum(square(x) * x, {1}); },
                                        x64({2, 3}, 7), "reduce_sum");
}

// A reduction's gradient reshapes the incoming gradient to the kept dims, and here that incoming
// gradient depends on x, so the outer tape differentiates through the reshape.
TEST(HigherOrderGradients, ReductionsOfNonlinearResults) {
  expect_hessian_vector_product_matches([](const Tensor& x) { return square(reduce_mean(x, {0}, true)); },
                                        x64({3, 2}, 8), "reduce_mean");
  expect_hessian_vector_product_matches([](const Tensor& x) { return square(reduce_max(x, {-1})); }, x64({2, 4}, 9),
                                        "reduce_max");
  expect_hessian_vector_product_matches([](const Tensor& x) { return exp(reduce_min(x)); }, x64({5}, 10),
                                        "reduce_min");
}

TEST(HigherOrderGradients, Losses) {
  Tensor labels = constant({2, 0, 1});
  expect_hessian_vector_product_matches(
      [labels](const Tensor& x) { return nn::sparse_softmax_cross_entropy(labels, x); }, x64({3, 4}, 11),
      "sparse_softmax_cross_entropy");
  Tensor target = x64({3, 2}, 12);
  expect_hessian_vector_product_matches(
      [target](const Tensor& x) { return nn::mean_squared_error(target, tanh(x)); }, x64({3, 2}, 13),
      "mean_squared_error");
}

// The second derivative of the cross-entropy is the softmax Jacobian, diag(p) - p p^T, per
// example, divided by the batch: checked in closed form for one row.
TEST(HigherOrderGradients, CrossEntropyHessianClosedForm) {
  std::vector<double> z = {0.3, -1.0, 2.0};
  Tensor x = constant(z, Shape{1, 3});
  Tensor v = constant({{1.0, 0.0, 0.0}});
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(nn::sparse_softmax_cross_entropy(constant({1}), x), x);
  }
  std::vector<double> h = outer.gradient(reduce_sum(g * v), x).to_vector<double>();  // first row of H
  double s = std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]);
  std::vector<double> p = {std::exp(z[0]) / s, std::exp(z[1]) / s, std::exp(z[2]) / s};
  EXPECT_NEAR(h[0], p[0] - p[0] * p[0], 1e-14);
  EXPECT_NEAR(h[1], -p[0] * p[1], 1e-14);
  EXPECT_NEAR(h[2], -p[0] * p[2], 1e-14);
}

}  // namespace
}  // namespace weft
