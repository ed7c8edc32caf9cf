// Gradients of the activations: finite differences in float64, and closed forms computed here
// element by element as an independent reference.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

Tensor f64(const Shape& s, int64_t seed, double lo = -2, double hi = 2) {
  return random::uniform(s, lo, hi, seed, float64);
}

// Values in [-2, -0.1] u [0.1, 2], so a central difference never straddles relu's kink.
Tensor away_from_zero(const Shape& s, int64_t seed) {
  std::vector<double> v = f64(s, seed).to_vector<double>();
  for (double& x : v) x = x < 0 ? x - 0.1 : x + 0.1;
  return constant(v, s);
}

TEST(ActivationGradients, ElementwiseFiniteDifferences) {
  for (const Shape& s : {Shape{7}, Shape{3, 4}, Shape{2, 3, 2}}) {
    expect_gradients_match([](auto& x) { return relu(x[0]); }, {away_from_zero(s, 1)}, 1e-6, 1e-6, "relu");
    expect_gradients_match([](auto& x) { return sigmoid(x[0]); }, {f64(s, 2, -6, 6)}, 1e-6, 1e-6, "sigmoid");
    expect_gradients_match([](auto& x) { return tanh(x[0]); }, {f64(s, 3, -3, 3)}, 1e-6, 1e-6, "tanh");
    expect_gradients_match([](auto& x) { return erf(x[0]); }, {f64(s, 4, -3, 3)}, 1e-6, 1e-6, "erf");
    expect_gradients_match([](auto& x) { return gelu(x[0]); }, {f64(s, 5, -4, 4)}, 1e-6, 1e-6, "gelu");
    expect_gradients_match([](auto& x) { return gelu(x[0], true); }, {f64(s, 6, -4, 4)}, 1e-6, 1e-6,
                           "gelu approximate");
  }
}

TEST(ActivationGradients, SoftmaxFamiliesOnEveryAxis) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{5}, -1}, {{5}, 0}, {{3, 4}, -1}, {{3, 4}, 1}, {{3, 4}, 0}, {{3, 4}, -2},
                        {{2, 3, 4}, -1}, {{2, 3, 4}, 1}, {{2, 3, 4}, 0}};
  int64_t seed = 20;
  for (const Case& c : cases) {
    int64_t axis = c.axis;
    std::string where = " shape " + c.shape.to_string() + " axis " + std::to_string(axis);
    expect_gradients_match([&](auto& x) { return softmax(x[0], axis); }, {f64(c.shape, ++seed, -3, 3)}, 1e-6, 1e-6,
                           "softmax" + where);
    expect_gradients_match([&](auto& x) { return log_softmax(x[0], axis); }, {f64(c.shape, ++seed, -3, 3)}, 1e-6,
                           1e-6, "log_softmax" + where);
  }
}

// The finite-difference check would pass for a gradient that is wrong by a constant along the
// axis only if the weighting hid it; a closed form of the gradient of sum(w * softmax(x)) along
// axis 0 does not depend on that.
TEST(ActivationGradients, SoftmaxAxisZeroClosedForm) {
  std::vector<double> x = {0.5, -1.0, 2.0, 0.25, 1.5, -0.5};  // shape (3, 2), softmax over dim 0
  std::vector<double> w = {1.0, 2.0, -1.0, 0.5, 3.0, 1.0};
  Tensor xt = constant(x, Shape{3, 2});
  GradientTape tape;
  tape.watch(xt);
  Tensor g = tape.gradient(reduce_sum(softmax(xt, 0) * constant(w, Shape{3, 2})), xt);
  std::vector<double> got = g.to_vector<double>();
  for (int col = 0; col < 2; ++col) {
    double z = 0;
    for (int r = 0; r < 3; ++r) z += std::exp(x[r * 2 + col]);
    double dot = 0;
    for (int r = 0; r < 3; ++r) dot += w[r * 2 + col] * std::exp(x[r * 2 + col]) / z;
    for (int r = 0; r < 3; ++r) {
      double p = std::exp(x[r * 2 + col]) / z;
      EXPECT_NEAR(got[r * 2 + col], p * (w[r * 2 + col] - dot), 1e-12) << "row " << r << " col " << col;
    }
  }
}

TEST(ActivationGradients, ClosedFormsOfTheElementwiseOnes) {
  std::vector<double> x = {-1.5, -0.25, 0.3, 2.0};
  Tensor xt = constant(x, Shape{4});
  GradientTape tape(/*persistent=*/true);
  tape.watch(xt);
  std::vector<double> gr = tape.gradient(relu(xt), xt).to_vector<double>();
  std::vector<double> gs = tape.gradient(sigmoid(xt), xt).to_vector<double>();
  std::vector<double> gt = tape.gradient(tanh(xt), xt).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    double s = 1 / (1 + std::exp(-x[i]));
    EXPECT_EQ(gr[i], x[i] > 0 ? 1.0 : 0.0);
    EXPECT_NEAR(gs[i], s * (1 - s), 1e-14);
    EXPECT_NEAR(gt[i], 1 - std::tanh(x[i]) * std::tanh(x[i]), 1e-14);
  }
}

TEST(ActivationGradients, Float32GradientsKeepDtypeAndAreClose) {
  Tensor x = random::uniform({4, 5}, -2, 2, 9);
  Tensor x64 = cast(x, float64);
  using Act = Tensor (*)(const Tensor&);
  const Act acts[] = {[](const Tensor& t) { return sigmoid(t); }, [](const Tensor& t) { return tanh(t); },
                      [](const Tensor& t) { return softmax(t); }, [](const Tensor& t) { return log_softmax(t, 0); }};
  for (Act act : acts) {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    tape.watch(x64);
    Tensor g32 = tape.gradient(reduce_sum(square(act(x))), x);
    Tensor g64 = tape.gradient(reduce_sum(square(act(x64))), x64);
    ASSERT_EQ(g32.dtype(), float32);
    std::vector<float> a = g32.to_vector<float>();
    std::vector<double> b = g64.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, std::abs(b[i])));
  }
}

}  // namespace
}  // namespace weft
