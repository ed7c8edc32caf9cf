// A whole training step (forward, backward, optimizer update) traced into one graph gives the
// same numbers as the eager step, step after step.
#include <gtest/gtest.h>

#include <cmath>

#include "api/function.h"
#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/nn/losses.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/random.h"
#include "api/optim/optimizers.h"

namespace weft {
namespace {

struct Run {
  nn::Sequential model{nn::Dense(16, nn::relu), nn::Dense(4)};
  std::vector<float> losses;
};

// Two models with the same weights: build both, then copy the first into the second.
void same_weights(Run& a, Run& b, const Tensor& x) {
  a.model(x, false);
  b.model(x, false);
  auto va = a.model.trainable_variables(), vb = b.model.trainable_variables();
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) vb[i].assign(va[i].value());
}

template <class Opt>
void expect_traced_step_matches_eager(Opt make_optimizer) {
  Tensor x = random::normal({32, 8}, 0, 1, 11);
  Tensor y = random::uniform({32}, 0, 3.99, 12);
  Tensor labels = cast(y, int32);
  Run eager, traced;
  same_weights(eager, traced, x);
  optim::Optimizer opt_e = make_optimizer();
  optim::Optimizer opt_t = make_optimizer();

  auto step_body = [](Run& r, optim::Optimizer& opt, const Tensor& xb, const Tensor& yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, r.model(xb, true));
    auto vars = r.model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  auto traced_step = function([&](Tensor xb, Tensor yb) { return step_body(traced, opt_t, xb, yb); });

  for (int step = 0; step < 5; ++step) {
    Tensor loss_e = step_body(eager, opt_e, x, labels);
    Tensor loss_t = traced_step(x, labels);
    const float le = loss_e.item<float>(), lt = loss_t.item<float>();
    EXPECT_NEAR(le, lt, 1e-5f * std::max(1.f, std::abs(le))) << "step " << step;
    auto ve = eager.model.trainable_variables(), vt = traced.model.trainable_variables();
    for (size_t i = 0; i < ve.size(); ++i) {
      auto a = ve[i].value().to_vector<float>(), b = vt[i].value().to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-5f) << "variable " << i << " step " << step;
    }
  }
  EXPECT_EQ(traced_step.tracing_count(), 1);
  EXPECT_EQ(opt_t.iterations(), 5);
  EXPECT_EQ(opt_e.iterations(), 5);
}

TEST(TracedTraining, SgdStepMatchesEager) {
  expect_traced_step_matches_eager([] { return optim::SGD(0.1); });
}

TEST(TracedTraining, MomentumStepMatchesEager) {
  expect_traced_step_matches_eager([] { return optim::SGD(0.05, 0.9); });
}

TEST(TracedTraining, AdamStepMatchesEager) {
  expect_traced_step_matches_eager([] { return optim::Adam(0.01); });
}

TEST(TracedTraining, LearningRateChangesReachTheTracedStep) {
  Variable w(constant({1.f}), "w");
  optim::SGD opt(1.0);
  auto step = function([&]() { opt.apply_gradients({constant({1.f})}, {w}); });
  step();
  EXPECT_FLOAT_EQ(w.value().item<float>(), 0.f);
  opt.set_learning_rate(0.5);
  step();
  EXPECT_FLOAT_EQ(w.value().item<float>(), -0.5f);
  EXPECT_EQ(step.tracing_count(), 1);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(TracedTraining, RelaxedShapesTrainOnEveryBatchSizeWithOneTrace) {
  nn::Sequential model{nn::Dense(8, nn::relu), nn::Dense(3)};
  optim::Adam opt(0.01);
  auto step = function(
      [&](Tensor xb, Tensor yb) {
        GradientTape tape;
        Tensor loss = nn::sparse_softmax_cross_entropy(yb, model(xb, true));
        auto vars = model.trainable_variables();
        opt.apply_gradients(tape.gradient(loss, vars), vars);
        return loss;
      },
      {.input_signature = {TensorSpec{float32, {-1, 5}}, TensorSpec{int32, {-1}}}});
  for (int64_t batch : {4, 7, 1, 16}) {
    Tensor x = random::normal({batch, 5}, 0, 1, batch);
    Tensor y = cast(random::uniform({batch}, 0, 2.99, batch + 1), int32);
    Tensor loss = step(x, y);
    EXPECT_TRUE(std::isfinite(loss.item<float>()));
  }
  EXPECT_EQ(step.tracing_count(), 1);
}

}  // namespace
}  // namespace weft
