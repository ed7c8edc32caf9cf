// gelu, exact and approximate: against their formulas written here in float64, the exact one's
// op against its composition bit for bit, eagerly and traced (where the whole activation is one
// node with eager's bits), as a Dense
// layer's activation, and in a traced training step whose backward pass fuses too. The gradient
// checks are in activation_gradient_test.cpp and higher_order_gradient_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "weft/weft.h"

namespace weft {
namespace {

double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

std::vector<double> inputs() {
  std::vector<double> xs = {0.0, -0.0, 1e-8, -1e-8, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0, 12.0, -12.0, 40.0};
  for (int i = -50; i <= 50; ++i) xs.push_back(i * 0.137);
  return xs;
}

int count_nodes(const Graph& g, const std::string& type) {
  int n = 0;
  for (int32_t id : g.ir().node_ids()) n += g.ir().node(id).type() == type;
  return n;
}

TEST(Gelu, Float64MatchesTheFormulas) {
  const std::vector<double> xs = inputs();
  const std::vector<double> exact = gelu(constant(xs)).to_vector<double>();
  const std::vector<double> approx = gelu(constant(xs), true).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(exact[i], gelu_exact(xs[i]), 1e-15 * std::max(1.0, std::abs(xs[i]))) << "x = " << xs[i];
    EXPECT_NEAR(approx[i], gelu_tanh(xs[i]), 1e-15 * std::max(1.0, std::abs(xs[i]))) << "x = " << xs[i];
  }
}

TEST(Gelu, Float32WithinAFewUlpsOfFloat64) {
  const std::vector<double> xs = inputs();
  std::vector<float> xf(xs.begin(), xs.end());
  const std::vector<float> exact = gelu(constant(xf)).to_vector<float>();
  const std::vector<float> approx = gelu(constant(xf), true).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xf[i];
    // Relative to max(|x|, 1): for negative x the result is a small difference of large terms,
    // as in every framework's float32 gelu.
    const double scale = std::max(1.0, std::abs(x));
    EXPECT_NEAR(exact[i], gelu_exact(x), 5e-7 * scale) << "x = " << x;
    EXPECT_NEAR(approx[i], gelu_tanh(x), 5e-7 * scale) << "x = " << x;
  }
}

// The Gelu op computes (x * 0.5) * (erf(x * sqrt(1/2)) + 1) in one pass: the bits of those ops run
// one by one, special values included, in float32 (weft's vectorised erf) and float64 (libm's).
TEST(Gelu, TheOpHasTheBitsOfItsComposition) {
  std::vector<double> xs = inputs();
  for (double v : {double(INFINITY), -double(INFINITY), double(NAN), 1e30, -1e30, -2.5, -3.9, -4.1, 1e-40})
    xs.push_back(v);
  for (DType dt : {float32, float64}) {
    const Tensor x = cast(constant(xs), dt);
    const Tensor composed = mul(mul(x, 0.5), add(erf(mul(x, 0.7071067811865476)), 1.0));
    const std::vector<double> got = cast(gelu(x), float64).to_vector<double>();
    const std::vector<double> want = cast(composed, float64).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << dtype_name(dt) << " x = " << xs[i];
      else EXPECT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want[i])) << dtype_name(dt) << " x = " << xs[i];
    }
  }
}

TEST(Gelu, TracedFusesIntoOneNodeWithEagersBits) {
  const Tensor x = random::normal({64, 96}, 0, 2, 11);
  for (bool approximate : {false, true}) {
    auto traced = function([approximate](Tensor in) { return gelu(in, approximate); });
    const Tensor eager = gelu(x, approximate), t = traced(x);
    EXPECT_EQ(t.to_vector<float>(), eager.to_vector<float>()) << "approximate " << approximate;
    const Graph g = traced.graph(x);
    // The exact gelu is one op of its own (Gelu); the approximation's ops fuse into one node.
    EXPECT_EQ(count_nodes(g, "FusedElementwise") + count_nodes(g, "Gelu"), 1) << "approximate " << approximate;
    EXPECT_EQ(count_nodes(g, "Erf") + count_nodes(g, "Tanh") + count_nodes(g, "Mul"), 0)
        << "approximate " << approximate;
  }
}

TEST(Gelu, DenseActivationTrainsTracedLikeEager) {
  const Tensor x = random::normal({16, 8}, 0, 1, 21), y = random::normal({16, 4}, 0, 1, 22);
  nn::Sequential eager_model{nn::Dense(12, nn::gelu), nn::Dense(4)};
  nn::Sequential traced_model{nn::Dense(12, nn::gelu), nn::Dense(4)};
  for (nn::Sequential* m : {&eager_model, &traced_model}) {  // built with the same initial values
    random::set_seed(5);
    (*m)(x);
  }
  optim::SGD eager_opt(0.1), traced_opt(0.1);
  auto loss_of = [](nn::Sequential& m, const Tensor& in, const Tensor& target) {
    return reduce_mean(square(m(in) - target));
  };
  auto step = [&](nn::Sequential& m, optim::SGD& opt, const Tensor& in, const Tensor& target) {
    GradientTape tape;
    Tensor loss = loss_of(m, in, target);
    opt.apply_gradients(tape.gradient(loss, m.trainable_variables()), m.trainable_variables());
    return loss;
  };
  auto traced_step = function([&](Tensor in, Tensor target) { return step(traced_model, traced_opt, in, target); });
  for (int i = 0; i < 3; ++i) {
    const float le = step(eager_model, eager_opt, x, y).item<float>();
    const float lt = traced_step(x, y).item<float>();
    EXPECT_EQ(le, lt) << "step " << i;
  }
  EXPECT_LT(count_nodes(traced_step.graph(x, y), "Erf"), 1) << "gelu and its gradient fuse";
}

}  // namespace
}  // namespace weft
