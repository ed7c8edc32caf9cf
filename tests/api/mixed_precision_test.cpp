// Mixed precision: nn::set_dtype_policy (the dtypes each layer computes and keeps its variables
// in, float32 gradients, losses in float32, a bfloat16 transformer training eagerly and traced)
// and optim::LossScaleOptimizer (scaling, a step with an infinite gradient skipped and the scale
// halved, growth after a run of good steps, eager against traced, a float16 model training;
// unscale_gradients, then clipping, then apply_unscaled_gradients).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "weft/weft.h"

namespace weft {
namespace {

// Every test leaves the global policy as it found it.
class MixedPrecision : public ::testing::Test {
 protected:
  void TearDown() override { nn::set_dtype_policy("float32"); }
};

TEST_F(MixedPrecision, LayersComputeInBFloat16AndKeepFloat32Variables) {
  nn::set_dtype_policy("mixed_bfloat16");
  EXPECT_EQ(nn::dtype_policy().compute_dtype, DType::BFloat16);
  nn::Dense dense(6, nn::gelu);
  nn::LayerNormalization norm;
  nn::Embedding embedding(10, 6);
  nn::MultiHeadAttention attention(2, 3, {.causal = true});
  nn::Conv2D conv(2, {3, 3}, {.padding = "same"});
  const Tensor x = random::normal({2, 5, 4}, 0, 1, 3);
  GradientTape tape;
  const Tensor h = dense(x);
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  const Tensor e = embedding(constant(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0}, Shape{2, 5}));
  EXPECT_EQ(e.dtype(), DType::BFloat16);
  const Tensor a = attention(norm(h + e));
  EXPECT_EQ(a.dtype(), DType::BFloat16);
  EXPECT_EQ(conv(random::normal({1, 4, 4, 1}, 0, 1, 4)).dtype(), DType::BFloat16);
  const Tensor loss = nn::sparse_softmax_cross_entropy(constant(std::vector<int32_t>(10, 1), Shape{10}),
                                                       reshape(a, {10, 6}));
  EXPECT_EQ(loss.dtype(), DType::Float32);  // losses in float32
  std::vector<Variable> vars = dense.trainable_variables();
  for (const Variable& v : norm.trainable_variables()) vars.push_back(v);
  for (const Variable& v : embedding.trainable_variables()) vars.push_back(v);
  for (const Variable& v : attention.trainable_variables()) vars.push_back(v);
  for (const Variable& v : vars) EXPECT_EQ(v.dtype(), DType::Float32) << v.name();
  const std::vector<Tensor> grads = tape.gradient(loss, vars);
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << vars[i].name();
    EXPECT_EQ(grads[i].dtype(), DType::Float32) << vars[i].name();
  }
  // Layers made before the policy changed keep the one they were made with.
  nn::set_dtype_policy("float32");
  EXPECT_EQ(dense(x).dtype(), DType::BFloat16);
  EXPECT_EQ(nn::Dense(3)(x).dtype(), DType::Float32);
}

TEST_F(MixedPrecision, TheDefaultPolicyFollowsTheInputsAndUnknownNamesAreRefused) {
  const Tensor x = random::normal({2, 3}, 0, 1, 1, float64);
  nn::Dense dense(2);
  EXPECT_EQ(dense(x).dtype(), DType::Float64);
  EXPECT_EQ(dense.trainable_variables()[0].dtype(), DType::Float64);
  try {
    nn::set_dtype_policy("mixed_float8");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("mixed_float8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nn::dtype_policy().name, "float32");
}

// A small causal transformer block on a copying task; its loss falls under mixed_bfloat16, and
// the traced step computes what the eager one does (up to bfloat16's rounding, which the fused
// traced ops do less often).
TEST_F(MixedPrecision, ABFloat16TransformerTrainsEagerlyAndTraced) {
  nn::set_dtype_policy("mixed_bfloat16");
  const Tensor ids = cast(random::uniform({4, 6}, 0, 7.99, 9), int32);
  auto make = [&] {
    random::set_seed(5);  // the same draws for both models' variables, built here
    nn::Sequential m{nn::Embedding(8, 16), nn::LayerNormalization(), nn::MultiHeadAttention(2, 8, {.causal = true}),
                     nn::Dense(32, nn::gelu), nn::Dense(8)};
    m(ids);
    return m;
  };
  nn::Sequential eager_model = make(), traced_model = make();
  optim::AdamW eager_opt(1e-2, 0.01), traced_opt(1e-2, 0.01);
  auto step = [&](nn::Sequential& m, optim::AdamW& opt) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(reshape(ids, {-1}), reshape(m(ids, true), {-1, 8}));
    auto vars = m.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  auto traced = function([&](Tensor) { return step(traced_model, traced_opt); });
  float first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    const float le = step(eager_model, eager_opt).item<float>();
    const float lt = traced(ids).item<float>();
    if (i == 0) {
      first = le;
      EXPECT_NEAR(le, lt, 1e-6f);  // the same variables: the same forward
    }
    last = std::max(le, lt);
    // Later steps drift apart by bfloat16's rounding (fused traced ops round less often).
    if (i < 5) {
      EXPECT_NEAR(le, lt, 0.02f * std::max(1.0f, le)) << "step " << i;
    }
  }
  EXPECT_LT(last, 0.5f * first);  // both trained
  for (const Variable& v : traced_model.trainable_variables()) EXPECT_EQ(v.dtype(), DType::Float32);
}

TEST_F(MixedPrecision, LossScalingSkipsANonFiniteStepHalvesTheScaleAndGrowsAfterGoodSteps) {
  for (bool traced : {false, true}) {
    SCOPED_TRACE(traced ? "traced" : "eager");
    Variable w(constant(std::vector<float>{1.0f, 2.0f}, Shape{2}), "w");
    optim::LossScaleOptimizer opt(optim::SGD(0.5), /*initial_scale=*/1024, /*dynamic_growth_steps=*/2);
    EXPECT_EQ(opt.loss_scale(), 1024.0);
    // The gradient of scale_loss(sum(w * g)) is scale * g; the update uses g.
    auto body = [&](Tensor g) {
      GradientTape tape;
      Tensor loss = reduce_sum(mul(w.value(), g));
      Tensor scaled = opt.scale_loss(loss);
      opt.apply_gradients(tape.gradient(scaled, std::vector<Variable>{w}), {w});
      return loss;
    };
    auto traced_step = function(body);
    auto run = [&](std::vector<float> g) {
      const Tensor t = constant(g, Shape{2});
      if (traced) traced_step(t);
      else body(t);
    };
    run({1.0f, -2.0f});  // good: w -= 0.5 * g
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{0.5f, 3.0f}));
    EXPECT_EQ(opt.loss_scale(), 1024.0);
    EXPECT_EQ(opt.iterations(), 1);
    run({std::numeric_limits<float>::infinity(), 1.0f});  // skipped, scale halved
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{0.5f, 3.0f}));
    EXPECT_EQ(opt.loss_scale(), 512.0);
    EXPECT_EQ(opt.iterations(), 1);
    run({std::nanf(""), 1.0f});  // NaN too
    EXPECT_EQ(opt.loss_scale(), 256.0);
    EXPECT_EQ(opt.iterations(), 1);
    run({2.0f, 2.0f});
    EXPECT_EQ(opt.loss_scale(), 256.0);  // one good step since the last skip
    run({2.0f, 2.0f});
    EXPECT_EQ(opt.loss_scale(), 512.0);  // two: the scale doubles
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{-1.5f, 1.0f}));
    EXPECT_EQ(opt.iterations(), 3);
  }
  EXPECT_THROW(optim::LossScaleOptimizer(optim::SGD(0.1), 0.5), InvalidArgument);
  EXPECT_THROW(optim::LossScaleOptimizer(optim::SGD(0.1), 2.0, 0), InvalidArgument);
}

// unscale_gradients gives the gradients of the unscaled loss (a power-of-two scale divides
// exactly) and changes nothing; an undefined gradient stays undefined.
TEST_F(MixedPrecision, UnscaledGradientsAreTheTrueOnes) {
  for (bool traced : {false, true}) {
    SCOPED_TRACE(traced ? "traced" : "eager");
    Variable w(constant(std::vector<float>{1.0f, 2.0f, 3.0f}, Shape{3}), "w");
    Variable unused(constant(0.0f), "unused");
    optim::LossScaleOptimizer opt(optim::SGD(0.5), /*initial_scale=*/4096, 2);
    const std::vector<Variable> vars{w, unused};
    auto body = [&](Tensor g) {
      GradientTape tape;
      Tensor loss = reduce_sum(mul(w.value(), g));
      std::vector<Tensor> scaled = tape.gradient(opt.scale_loss(loss), vars);
      scaled[1] = Tensor();  // (the tape gives an unconnected variable zeros)
      const std::vector<Tensor> grads = opt.unscale_gradients(scaled, vars);
      EXPECT_EQ(grads.size(), 2u);
      EXPECT_FALSE(grads[1].defined());
      return std::make_tuple(scaled[0], grads[0]);
    };
    auto traced_body = function(body);
    const Tensor g = constant(std::vector<float>{0.25f, -3.0f, 1e-3f}, Shape{3});
    auto [scaled, unscaled] = traced ? traced_body(g) : body(g);
    EXPECT_EQ(scaled.to_vector<float>(), (std::vector<float>{1024.0f, -12288.0f, 4096.0f * 1e-3f}));
    EXPECT_EQ(unscaled.to_vector<float>(), g.to_vector<float>());
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
    EXPECT_EQ(opt.loss_scale(), 4096.0);
    EXPECT_EQ(opt.iterations(), 0);
  }
  optim::LossScaleOptimizer opt(optim::SGD(0.5));
  EXPECT_THROW(opt.unscale_gradients({constant(1.0f)}, {}), InvalidArgument);
  EXPECT_THROW(opt.apply_unscaled_gradients({constant(1.0f)}, {}), InvalidArgument);
}

// PyTorch's scaler.unscale_, clip_grad_norm_, scaler.step: the update is lr * g * min(1, c/|g|)
// with the true g; the scale is divided out once (dividing twice would leave g / 1024, inside the
// clip norm, and a far smaller step). An infinite or NaN gradient, clipped (to NaNs), still skips
// the step and halves the scale; then good steps grow it again.
TEST_F(MixedPrecision, UnscaleThenClipThenApplyIsTheFormulaAndAnInfiniteGradientStillSkips) {
  for (bool traced : {false, true}) {
    SCOPED_TRACE(traced ? "traced" : "eager");
    Variable w(constant(std::vector<float>{1.0f, 2.0f}, Shape{2}), "w");
    optim::LossScaleOptimizer opt(optim::SGD(0.5), /*initial_scale=*/1024, /*dynamic_growth_steps=*/2);
    auto body = [&](Tensor g) {
      GradientTape tape;
      Tensor loss = reduce_sum(mul(w.value(), g));
      const std::vector<Variable> vars{w};
      const std::vector<Tensor> grads = opt.unscale_gradients(tape.gradient(opt.scale_loss(loss), vars), vars);
      auto [clipped, norm] = clip_by_global_norm(grads, /*clip_norm=*/1.0);
      opt.apply_unscaled_gradients(clipped, vars);
      return norm;
    };
    auto traced_step = function(body);
    auto run = [&](std::vector<float> g) {
      const Tensor t = constant(g, Shape{2});
      return (traced ? traced_step(t) : body(t)).item<float>();
    };
    auto expect_w = [&](std::vector<float> expected) {
      const std::vector<float> got = w.value().to_vector<float>();
      for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6f) << i;
    };
    EXPECT_EQ(run({3.0f, -4.0f}), 5.0f);  // |g| = 5: clipped to (0.6, -0.8)
    expect_w({1.0f - 0.5f * 0.6f, 2.0f + 0.5f * 0.8f});
    EXPECT_EQ(opt.loss_scale(), 1024.0);
    EXPECT_EQ(opt.iterations(), 1);
    EXPECT_NEAR(run({0.3f, 0.4f}), 0.5f, 1e-6f);  // within the clip norm: g itself
    expect_w({0.7f - 0.15f, 2.4f - 0.2f});
    EXPECT_EQ(opt.loss_scale(), 2048.0);  // two good steps: the scale doubles
    EXPECT_EQ(opt.iterations(), 2);
    const std::vector<float> before = w.value().to_vector<float>();
    EXPECT_TRUE(std::isinf(run({std::numeric_limits<float>::infinity(), 1.0f})));
    EXPECT_EQ(w.value().to_vector<float>(), before);  // skipped
    EXPECT_EQ(opt.loss_scale(), 1024.0);
    EXPECT_EQ(opt.iterations(), 2);
    EXPECT_TRUE(std::isnan(run({std::nanf(""), 1.0f})));
    EXPECT_EQ(w.value().to_vector<float>(), before);
    EXPECT_EQ(opt.loss_scale(), 512.0);
    EXPECT_EQ(opt.good_steps_variable().value().item<float>(), 0.0f);
    run({0.0f, 2.0f});  // clipped to (0, 1)
    expect_w({before[0], before[1] - 0.5f});
    EXPECT_EQ(opt.loss_scale(), 512.0);
    EXPECT_EQ(opt.iterations(), 3);
  }
}

// TF1 style: the train op of a Session runs the cond; a run with an infinite gradient skips.
TEST_F(MixedPrecision, LossScalingInASessionRunsByItsTrainOp) {
  Variable w(constant(std::vector<float>{1.0f, 2.0f}, Shape{2}), "w");
  optim::LossScaleOptimizer opt(optim::Adam(0.1), 64, 2);
  Graph g;
  Tensor x, loss;
  Operation train;
  {
    GraphScope scope(g);
    x = placeholder(float32, {2}, "x");
    GradientTape tape;
    loss = reduce_sum(mul(w.value(), x));
    train = opt.apply_gradients(tape.gradient(opt.scale_loss(loss), std::vector<Variable>{w}), {w});
  }
  ASSERT_TRUE(train.defined());
  Session sess(g);
  sess.run({{x, constant(std::vector<float>{1.0f, 1.0f}, Shape{2})}}, {loss}, {train});
  EXPECT_EQ(opt.iterations(), 1);
  const std::vector<float> after = w.value().to_vector<float>();
  EXPECT_NEAR(after[0], 0.9f, 1e-5f);  // Adam's first step: lr * sign(g)
  sess.run({{x, constant(std::vector<float>{std::numeric_limits<float>::infinity(), 1.0f}, Shape{2})}}, {loss}, {train});
  EXPECT_EQ(w.value().to_vector<float>(), after);
  EXPECT_EQ(opt.loss_scale(), 32.0);
  EXPECT_EQ(opt.iterations(), 1);
  sess.run({{x, constant(std::vector<float>{1.0f, 1.0f}, Shape{2})}}, {}, {train});
  EXPECT_EQ(opt.iterations(), 2);
}

// float16's range: the gradients of a loss scaled by 2^15 overflow for a while, so the first
// steps are skipped and the scale comes down; then the model trains.
TEST_F(MixedPrecision, AFloat16ModelTrainsWithDynamicLossScaling) {
  nn::set_dtype_policy("mixed_float16");
  random::set_seed(3);
  nn::Sequential model{nn::Dense(32, nn::relu), nn::Dense(4)};
  optim::LossScaleOptimizer opt(optim::Adam(1e-2), /*initial_scale=*/std::pow(2.0, 30), 50);
  const Tensor x = random::normal({64, 8}, 0, 1, 1);
  const Tensor y = cast(random::uniform({64}, 0, 3.99, 2), int32);
  auto step = function([&](Tensor xb, Tensor yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, model(xb, true));
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(opt.scale_loss(loss), vars), vars);
    return loss;
  });
  const float first = step(x, y).item<float>();
  float last = first;
  for (int i = 0; i < 80; ++i) last = step(x, y).item<float>();
  EXPECT_LT(opt.loss_scale(), std::pow(2.0, 30));  // it overflowed at 2^30 and came down
  EXPECT_GT(opt.iterations(), 40);
  EXPECT_LT(last, 0.7f * first);
  EXPECT_EQ(model.trainable_variables()[0].dtype(), DType::Float32);
}

}  // namespace
}  // namespace weft
