// AdamW against its formula (Keras' AdamW, written out here in float64), the decay's decoupling,
// exclusion from weight decay, and bad arguments. Traced, Session and data-parallel AdamW steps
// are in traced_training_test, graph_training_test and data_parallel_test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/dispatch.h"
#include "reference.h"
#include "weft/weft.h"

namespace weft {
namespace {

const std::vector<double> kInit = {0.5, -1.0, 2.0, 0.0, 3.0, -0.25};
const Shape kShape{2, 3};

std::vector<double> grad_at(int step) {
  std::vector<double> g(kInit.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(1.3 * static_cast<double>(i) - step) * (step + 2);
  return g;
}

struct Reference {
  std::vector<double> w = kInit, m = std::vector<double>(kInit.size()), v = std::vector<double>(kInit.size());
};

// Step t (from 1) of Keras' AdamW: decay by lr * wd, then Adam with the bias corrections folded
// into the rate and eps added to sqrt(v).
void adamw_step(Reference& r, const std::vector<double>& g, int t, double lr, double wd, double b1, double b2,
                double eps) {
  const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  for (size_t i = 0; i < g.size(); ++i) {
    const double decayed = r.w[i] - lr * wd * r.w[i];
    r.m[i] = b1 * r.m[i] + (1 - b1) * g[i];
    r.v[i] = b2 * r.v[i] + (1 - b2) * g[i] * g[i];
    r.w[i] = decayed - lr_t * r.m[i] / (std::sqrt(r.v[i]) + eps);
  }
}

std::vector<double> as_doubles(const Tensor& t) { return cast(t, float64).to_vector<double>(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

TEST(AdamW, FirstStepIsTheFormula) {
  const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  Variable w(constant(kInit, kShape), "w");
  optim::AdamW opt(lr, wd, b1, b2, eps);
  const std::vector<double> g = grad_at(1);
  opt.apply_gradients({constant(g, kShape)}, {w});
  const std::vector<double> got = w.value().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    // The first step in closed form: m = (1 - b1) g, v = (1 - b2) g^2, so m_hat = g, v_hat = g^2
    // and the Adam direction is g / (|g| + eps / sqrt(1 - b2)).
    const double m = (1 - b1) * g[i], v = (1 - b2) * g[i] * g[i];
    const double lr_t = lr * std::sqrt(1 - b2) / (1 - b1);
    const double want = kInit[i] - lr * wd * kInit[i] - lr_t * m / (std::sqrt(v) + eps);
    EXPECT_NEAR(got[i], want, 1e-15) << "element " << i;
    // The decoupled form of Loshchilov & Hutter (and PyTorch): var -= lr * (m_hat / (sqrt(v_hat) +
    // eps) + wd * var). Keras' eps, added to sqrt(v), acts as eps / sqrt(1 - b2) would there: the
    // two differ by about lr * eps / (sqrt(1 - b2) |g|).
    const double paper = kInit[i] - lr * (g[i] / (std::abs(g[i]) + eps) + wd * kInit[i]);
    EXPECT_NEAR(got[i], paper, 1.01 * lr * eps / (std::sqrt(1 - b2) * std::abs(g[i]))) << "element " << i;
  }
  EXPECT_EQ(opt.slot(w, "m").value().to_vector<double>()[0], (1 - b1) * g[0]);
}

TEST(AdamW, SeveralStepsMatchAFloat64Reference) {
  const double lr = 0.02, wd = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6;
  for (DType dtype : {float64, float32}) {
    Variable w(cast(constant(kInit, kShape), dtype), "w");
    optim::AdamW opt(lr, wd, b1, b2, eps);
    Reference ref;
    for (int t = 1; t <= 6; ++t) {
      opt.apply_gradients({cast(constant(grad_at(t), kShape), dtype)}, {w});
      adamw_step(ref, grad_at(t), t, lr, wd, b1, b2, eps);
      const double tol = dtype == float64 ? 1e-14 : 2e-6;
      const std::string what = "step " + std::to_string(t) + " " + std::string(dtype_name(dtype));
      expect_near(as_doubles(w), ref.w, tol, what);
      expect_near(as_doubles(opt.slot(w, "m")), ref.m, tol * 10, what + " m");
      expect_near(as_doubles(opt.slot(w, "v")), ref.v, tol * 100, what + " v");
    }
    EXPECT_EQ(opt.iterations(), 6);
    EXPECT_EQ(w.dtype(), dtype);
    ASSERT_EQ(opt.variables().size(), 2u);
    EXPECT_EQ(opt.variables()[0].name(), "w/m");
    EXPECT_EQ(opt.variables()[1].name(), "w/v");
  }
}

// With no gradient the Adam step is 0 and only the decay acts: w shrinks by (1 - lr * wd) per
// step, whatever the scale of the gradients (an L2 penalty added to the loss would instead be
// normalised by Adam into a step of about lr).
TEST(AdamW, DecayIsDecoupledFromTheGradients) {
  Variable w(constant({4.0, -2.0}), "w");
  optim::AdamW opt(0.1, 0.5);
  double factor = 1;
  for (int t = 1; t <= 4; ++t) {
    opt.apply_gradients({constant({0.0, 0.0})}, {w});
    factor *= 1 - 0.1 * 0.5;
    expect_near(w.value().to_vector<double>(), {4.0 * factor, -2.0 * factor}, 1e-15, "step " + std::to_string(t));
  }
}

TEST(AdamW, ZeroWeightDecayIsAdamBitForBit) {
  Variable a(constant(kInit, kShape), "a"), b(constant(kInit, kShape), "b");
  optim::AdamW adamw(0.01, 0.0);
  optim::Adam adam(0.01);
  for (int t = 1; t <= 3; ++t) {
    adamw.apply_gradients({constant(grad_at(t), kShape)}, {a});
    adam.apply_gradients({constant(grad_at(t), kShape)}, {b});
  }
  EXPECT_EQ(a.value().to_vector<double>(), b.value().to_vector<double>());
}

TEST(AdamW, ExcludedVariablesGetNoDecay) {
  const double lr = 0.01, wd = 0.2;
  Variable kernel(constant(kInit, kShape), "dense/kernel");
  Variable bias(constant(kInit, kShape), "dense/bias");
  Variable gamma(constant(kInit, kShape), "block/layer_normalization/gamma");
  optim::AdamW opt(lr, wd);
  opt.exclude_from_weight_decay({"bias"});
  opt.exclude_from_weight_decay({"layer_normalization"});  // calls add up
  Reference decayed, plain;
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> g = grad_at(t);
    opt.apply_gradients({constant(g, kShape), constant(g, kShape), constant(g, kShape)}, {kernel, bias, gamma});
    adamw_step(decayed, g, t, lr, wd, 0.9, 0.999, 1e-7);
    adamw_step(plain, g, t, lr, 0.0, 0.9, 0.999, 1e-7);
  }
  expect_near(kernel.value().to_vector<double>(), decayed.w, 1e-14, "dense/kernel decays");
  expect_near(bias.value().to_vector<double>(), plain.w, 1e-14, "dense/bias is excluded");
  expect_near(gamma.value().to_vector<double>(), plain.w, 1e-14, "layer_normalization/gamma is excluded");
  EXPECT_GT(std::abs(decayed.w[4] - plain.w[4]), 1e-4) << "the decay should be visible";
}

TEST(AdamW, ExclusionOfModelVariablesByPath) {
  nn::Sequential model{nn::Dense(3), nn::Dense(2)};
  model(constant(std::vector<float>(8, 1.f), Shape{2, 4}));
  optim::AdamW opt(0.1, 0.5);
  opt.exclude_from_weight_decay({"bias"});
  std::vector<Variable> vars = model.trainable_variables();
  std::vector<std::vector<float>> before;
  std::vector<Tensor> zero_grads;
  for (Variable v : vars) {
    if (v.name().find("bias") != std::string::npos) v.assign(ones_like(v.value()));  // else zeros: no decay to see
    before.push_back(v.value().to_vector<float>());
    zero_grads.push_back(zeros_like(v.value()));
  }
  opt.apply_gradients(zero_grads, vars);
  int biases = 0;
  for (size_t i = 0; i < vars.size(); ++i) {
    const bool is_bias = vars[i].name().find("bias") != std::string::npos;
    biases += is_bias;
    const std::vector<float> now = vars[i].value().to_vector<float>();
    for (size_t k = 0; k < now.size(); ++k)
      EXPECT_FLOAT_EQ(now[k], is_bias ? before[i][k] : before[i][k] * (1 - 0.05f)) << vars[i].name();
  }
  EXPECT_EQ(biases, 2);
}

TEST(AdamW, ExclusionMustComeBeforeTheFirstStep) {
  Variable w(constant({1.0}), "w");
  optim::AdamW opt(0.1);
  EXPECT_NE(ref::error_message<InvalidArgument>([&] { opt.exclude_from_weight_decay({"bias", ""}); }).find("empty"),
            std::string::npos);
  opt.apply_gradients({constant({1.0})}, {w});
  const std::string message = ref::error_message<FailedPrecondition>([&] { opt.exclude_from_weight_decay({"w"}); });
  EXPECT_NE(message.find("exclude_from_weight_decay"), std::string::npos) << message;
  EXPECT_NE(message.find("before the first"), std::string::npos) << message;
}

TEST(AdamW, DefaultsAndBadHyperparameters) {
  optim::AdamW opt;
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 1e-3);
  EXPECT_DOUBLE_EQ(opt.weight_decay(), 0.01);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (double wd : {-0.1, nan, inf}) {
    const std::string message = ref::error_message<InvalidArgument>([&] { optim::AdamW(0.1, wd); });
    EXPECT_NE(message.find("[AdamW] weight_decay"), std::string::npos) << message;
  }
  EXPECT_NE(ref::error_message<InvalidArgument>([] { optim::AdamW(0.1, 0.01, 1.0); }).find("[AdamW] beta1"),
            std::string::npos);
  EXPECT_THROW(optim::AdamW(0.1, 0.01, 0.9, 0.999, 0.0), InvalidArgument);
  EXPECT_THROW(optim::AdamW(-1.0), InvalidArgument);
}

// The fused op refuses rates that are half given, or of the wrong kind, before anything runs.
TEST(AdamW, FusedOpChecksItsRates) {
  const OpDef& op = op_def("ApplyAdamW");
  Variable w(constant({1.0, 2.0}), "w"), m(zeros({2}, float64), "m"), v(zeros({2}, float64), "v");
  Tensor g = constant({0.5, 0.5});
  const Attrs betas{{"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-7}};
  auto run = [&](std::vector<Tensor> extra, Attrs attrs) {
    std::vector<Tensor> ins{w.value_for_update(), m.value_for_update(), v.value_for_update(), g};
    for (const Tensor& t : extra) ins.push_back(t);
    dispatch(op, ins, attrs);
  };
  Attrs only_lr = betas;
  only_lr.set("lr", 0.1);
  EXPECT_NE(ref::error_message<InvalidArgument>([&] { run({}, only_lr); }).find("decay"), std::string::npos);
  EXPECT_NE(ref::error_message<InvalidArgument>([&] { run({constant(0.1)}, betas); }).find("either"), std::string::npos);
  EXPECT_NE(ref::error_message<InvalidArgument>([&] { run({constant(0.1), constant(0.1f)}, betas); })
                .find("decay factor input must be a float64 scalar"),
            std::string::npos);
  EXPECT_EQ(w.value().to_vector<double>(), (std::vector<double>{1.0, 2.0}));
  // Both as inputs: the traced form.
  run({constant(0.0), constant(0.5)}, betas);
  EXPECT_EQ(w.value().to_vector<double>(), (std::vector<double>{0.5, 1.0}));
}

}  // namespace
}  // namespace weft
