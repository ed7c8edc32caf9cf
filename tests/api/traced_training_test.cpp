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
#include "runtime/graph.h"
#include "runtime/tensor_internals.h"

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

TEST(TracedTraining, AdamWWithAScheduleStepMatchesEager) {
  expect_traced_step_matches_eager([] {
    optim::AdamW opt(optim::CosineDecay(0.02, 3, 0.1, 2), 0.1);
    opt.exclude_from_weight_decay({"bias"});
    return opt;
  });
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

// A traced SGD step over Dense layers with relu, as seed 004's MLP trains.
struct Mlp {
  nn::Sequential model{nn::Dense(16, nn::relu), nn::Dense(16, nn::relu), nn::Dense(4)};
  optim::SGD opt{0.05};
};
auto traced_step(Mlp& m) {
  return function([&m](Tensor xb, Tensor yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, m.model(xb, true));
    auto vars = m.model.trainable_variables();
    m.opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  });
}

// relu's gradient takes relu's output, so the pre-activation has no other reader and each hidden
// layer's product, bias and relu become one FusedMatMul in the training graph, as in inference;
// in the backward pass, the product that carries the gradient back into a relu layer and that
// ReluGrad become one FusedMatMul "relu_grad".
TEST(TracedTraining, DenseReluLayersFuseInATrainingStep) {
  Mlp m;
  auto step = traced_step(m);
  const Tensor x = random::normal({32, 8}, 0, 1, 21);
  const Tensor y = cast(random::uniform({32}, 0, 3.99, 22), int32);
  const Graph g = step.graph(x, y);
  int fused_relu = 0, relu = 0, fused_relu_grad = 0, relu_grad = 0;
  for (int32_t id : g.ir().node_ids()) {
    const Node& n = g.ir().node(id);
    relu += n.type() == "Relu";
    relu_grad += n.type() == "ReluGrad";
    fused_relu += n.type() == "FusedMatMul" && n.attrs.get_or<std::string>("activation", "") == "relu";
    fused_relu_grad += n.type() == "FusedMatMul" && n.attrs.get_or<std::string>("activation", "") == "relu_grad";
  }
  EXPECT_EQ(fused_relu, 2);
  EXPECT_EQ(relu, 0);
  EXPECT_EQ(fused_relu_grad, 2);
  EXPECT_EQ(relu_grad, 0);
}

// The optimizer's update reads each variable only after every earlier read's readers have run, so
// nothing else holds the buffer and SGD writes it in place: a copy of every weight per step
// (what a read-for-update running at the step's start cost) would move the buffers.
// (A variable counts as updated when any of its elements changed: a hidden unit that the initial
// weights leave dead for the whole batch keeps its row and column, and the weights were drawn
// from an unseeded stream, so a test reading one element failed in a few percent of processes.)
TEST(TracedTraining, AnSgdStepUpdatesTheWeightsInPlace) {
  random::set_seed(7);
  Mlp m;
  auto step = traced_step(m);
  const Tensor x = random::normal({32, 8}, 0, 1, 23);
  const Tensor y = cast(random::uniform({32}, 0, 3.99, 24), int32);
  (void)step(x, y).item<float>();  // trace, and make the weights private to their variables
  std::vector<const void*> before;
  for (const Variable& v : m.model.trainable_variables()) before.push_back(raw_data(v.value()));
  std::vector<std::vector<float>> first;
  for (const Variable& v : m.model.trainable_variables()) first.push_back(v.value().to_vector<float>());
  for (int i = 0; i < 3; ++i) (void)step(x, y).item<float>();
  const std::vector<Variable> vars = m.model.trainable_variables();
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(raw_data(vars[i].value()), before[i]) << vars[i].name();
    EXPECT_NE(vars[i].value().to_vector<float>(), first[i]) << vars[i].name() << " was not updated";
  }
}

}  // namespace
}  // namespace weft
