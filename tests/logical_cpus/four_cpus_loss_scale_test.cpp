// optim::LossScaleOptimizer under DataParallel in one process of four logical CPUs (FourCpus
// suite, WEFT_LOGICAL_CPUS=4): the gradients are all-reduced before the finiteness check, so when
// one replica's shard makes its gradient infinite every replica skips the step alike, and the
// replicas' variables, loss scales and step counts stay identical; unscale_gradients all-reduces
// once, before clipping, so clipping sees the global gradient.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weft/weft.h"

namespace weft {
namespace {

bool four_cpus() {
  const char* n = std::getenv("WEFT_LOGICAL_CPUS");
  return n && std::string(n) == "4";
}

TEST(FourCpusLossScale, AnInfiniteGradientOnOneReplicaSkipsTheStepOnEvery) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  ASSERT_EQ(dp.num_replicas(), 4);
  Variable w(constant(std::vector<float>{1.0f, -1.0f, 0.5f}, Shape{3}), "w");
  optim::LossScaleOptimizer opt(optim::SGD(0.1), /*initial_scale=*/256, /*dynamic_growth_steps=*/100);
  auto step = dp.function([&](Tensor x) {
    GradientTape tape;
    Tensor loss = reduce_mean(reduce_sum(mul(x, w.value()), {1}));
    opt.apply_gradients(tape.gradient(opt.scale_loss(loss), std::vector<Variable>{w}), {w});
    return loss;
  });
  std::vector<float> rows(8 * 3, 1.0f);
  step(constant(rows, Shape{8, 3}));  // the mean row is (1, 1, 1): w -= 0.1
  std::vector<float> after_good = w.value().to_vector<float>();
  EXPECT_NEAR(after_good[0], 0.9f, 1e-6f);
  EXPECT_EQ(opt.iterations(), 1);

  rows[7 * 3 + 1] = std::numeric_limits<float>::infinity();  // the last replica's shard only
  step(constant(rows, Shape{8, 3}));
  EXPECT_EQ(w.value().to_vector<float>(), after_good);  // skipped
  EXPECT_EQ(opt.loss_scale(), 128.0);
  EXPECT_EQ(opt.iterations(), 1);
  for (const Tensor& v : dp.replica_values(w)) EXPECT_EQ(v.to_vector<float>(), after_good);
  for (const Tensor& s : dp.replica_values(opt.loss_scale_variable())) EXPECT_EQ(s.item<float>(), 128.0f);

  rows[7 * 3 + 1] = 1.0f;
  step(constant(rows, Shape{8, 3}));
  EXPECT_NEAR(w.value().to_vector<float>()[0], 0.8f, 1e-6f);
  EXPECT_EQ(opt.iterations(), 2);
  const std::vector<float> now = w.value().to_vector<float>();
  for (const Tensor& v : dp.replica_values(w)) EXPECT_EQ(v.to_vector<float>(), now);
}

// unscale_gradients all-reduces before anything else sees the gradients, so clipping is of the
// global gradient: replica 0 alone has rows (12, 16, 0), whose mean over the step's 8 rows is
// (3, 4, 0), norm 5, clipped to (0.6, 0.8, 0) (clipping each replica's own would give replica 0
// (0.6, 0.8, 0), the others 0, and a quarter of that after the all-reduce). An infinite gradient
// on the last replica alone makes every replica's clipped gradients NaN and skip the step.
TEST(FourCpusLossScale, UnscaleAllReducesOnceSoClippingSeesTheGlobalGradient) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  ASSERT_EQ(dp.num_replicas(), 4);
  Variable w(constant(std::vector<float>{1.0f, -1.0f, 0.5f}, Shape{3}), "w");
  optim::LossScaleOptimizer opt(optim::SGD(0.1), /*initial_scale=*/256, /*dynamic_growth_steps=*/100);
  auto step = dp.function([&](Tensor x) {
    GradientTape tape;
    Tensor loss = reduce_mean(reduce_sum(mul(x, w.value()), {1}));
    const std::vector<Variable> vars{w};
    const std::vector<Tensor> grads = opt.unscale_gradients(tape.gradient(opt.scale_loss(loss), vars), vars);
    auto [clipped, norm] = clip_by_global_norm(grads, 1.0);
    opt.apply_unscaled_gradients(clipped, vars);
    return norm;
  });
  std::vector<float> rows(8 * 3, 0.0f);
  for (int r : {0, 1}) {
    rows[r * 3] = 12.0f;
    rows[r * 3 + 1] = 16.0f;
  }
  EXPECT_NEAR(step(constant(rows, Shape{8, 3})).item<float>(), 5.0f, 1e-5f);
  const std::vector<float> after_good = w.value().to_vector<float>();
  EXPECT_NEAR(after_good[0], 1.0f - 0.06f, 1e-6f);
  EXPECT_NEAR(after_good[1], -1.0f - 0.08f, 1e-6f);
  EXPECT_EQ(after_good[2], 0.5f);
  EXPECT_EQ(opt.iterations(), 1);
  for (const Tensor& v : dp.replica_values(w)) EXPECT_EQ(v.to_vector<float>(), after_good);

  rows[7 * 3 + 2] = std::numeric_limits<float>::infinity();  // the last replica's shard only
  EXPECT_TRUE(std::isinf(step(constant(rows, Shape{8, 3})).item<float>()));
  EXPECT_EQ(w.value().to_vector<float>(), after_good);  // skipped
  EXPECT_EQ(opt.loss_scale(), 128.0);
  EXPECT_EQ(opt.iterations(), 1);
  for (const Tensor& v : dp.replica_values(w)) EXPECT_EQ(v.to_vector<float>(), after_good);
  for (const Tensor& s : dp.replica_values(opt.loss_scale_variable())) EXPECT_EQ(s.item<float>(), 128.0f);

  // Gradients that unscale_gradients did not all-reduce cannot be applied in a data-parallel step.
  auto unreduced = dp.function([&](Tensor x) {
    GradientTape tape;
    Tensor loss = reduce_mean(reduce_sum(mul(x, w.value()), {1}));
    const std::vector<Variable> vars{w};
    opt.apply_unscaled_gradients(tape.gradient(loss, vars), vars);
    return loss;
  });
  EXPECT_THROW(unreduced(constant(rows, Shape{8, 3})), FailedPrecondition);
}

}  // namespace
}  // namespace weft
