// Batch normalisation under DataParallel in one process of four logical CPUs (FourCpus suite,
// WEFT_LOGICAL_CPUS=4): BatchNormalization normalises each replica by its shard and keeps the same
// moving statistics on every replica; SyncBatchNormalization normalises by the global batch and
// trains like one process on the same global batches.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "runtime/tensor_internals.h"
#include "weft/weft.h"

namespace weft {
namespace {

bool four_cpus() {
  const char* n = std::getenv("WEFT_LOGICAL_CPUS");
  return n && std::string(n) == "4";
}

std::pair<Tensor, Tensor> batch(int64_t rows, int seed) {
  // Shifted and scaled features, so the statistics are far from the initial 0 and 1.
  Tensor x = add(mul(random::normal({rows, 6, 6, 2}, 0, 1, seed), 3.0), 1.5);
  Tensor y = cast(random::uniform({rows}, 0, 4.999, seed + 1000), int32);
  return {x, y};
}

nn::Sequential cnn(nn::Module norm) {
  // A depthwise layer too, so a MobileNet-style block trains under DataParallel as well.
  return nn::Sequential{nn::Conv2D(4, {3, 3}, {.padding = "same"}), norm, nn::ReLU(),
                        nn::DepthwiseConv2D({3, 3}, {.padding = "same", .depth_multiplier = 2}),
                        nn::MaxPool2D({2, 2}), nn::Flatten(), nn::Dense(5)};
}

Tensor train_step(nn::Sequential& model, optim::SGD& opt, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
  auto vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

void expect_near(const Variable& a, const Variable& b, float tol, const std::string& what) {
  auto va = a.value().to_vector<float>(), vb = b.value().to_vector<float>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  for (size_t k = 0; k < va.size(); ++k)
    ASSERT_NEAR(va[k], vb[k], tol * std::max(1.f, std::abs(vb[k]))) << what << " element " << k;
}

TEST(FourCpusDataParallel, BatchNormReplicasKeepTheSameMovingStatistics) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  ASSERT_EQ(dp.num_replicas(), 4);
  random::set_seed(3);
  nn::BatchNormalization bn;
  nn::Sequential model = cnn(bn);
  optim::SGD sgd(0.05);
  auto step = dp.function([&](Tensor x, Tensor y) { return train_step(model, sgd, x, y); });
  for (int i = 0; i < 4; ++i) {
    auto [x, y] = batch(22 + i, 10 + i);  // uneven shards
    step(x, y);
  }
  for (const Variable& v : {bn.moving_mean(), bn.moving_variance()}) {
    const std::vector<Tensor> values = dp.replica_values(v);
    ASSERT_EQ(values.size(), 4u);
    for (size_t r = 1; r < values.size(); ++r)
      EXPECT_EQ(std::memcmp(raw_data(values[r]), raw_data(values[0]), values[0].nbytes()), 0)
          << v.name() << " differs on replica " << r;
  }
  // The moving statistics moved away from their initial zeros and ones.
  EXPECT_GT(reduce_max(abs(bn.moving_mean().value())).item<float>(), 1e-3f);
}

TEST(FourCpusDataParallel, SyncBatchNormTrainsLikeOneProcess) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  nn::SyncBatchNormalization sync_bn;
  nn::BatchNormalization plain_bn;
  nn::Sequential parallel = cnn(sync_bn), single = cnn(plain_bn);
  const Tensor probe = batch(2, 1).first;
  random::set_seed(9);
  parallel(probe, false);
  random::set_seed(9);
  single(probe, false);
  optim::SGD opt_p(0.05), opt_s(0.05);
  auto dp_step = dp.function([&](Tensor x, Tensor y) { return train_step(parallel, opt_p, x, y); });
  auto one_step = function([&](Tensor x, Tensor y) { return train_step(single, opt_s, x, y); },
                           FunctionOptions{.relax_shapes = true});
  // The first step checks the gradient through the all-reduces tightly (the update it makes
  // would be off by far more without the backward all-reduce); later steps drift apart by
  // rounding alone (sums of squares against the fused op's two passes), compared more loosely.
  for (int i = 0; i < 4; ++i) {
    auto [x, y] = batch(21 + i, 40 + i);
    const float tol = i == 0 ? 1e-4f : 3e-3f;
    const float lp = dp_step(x, y).item<float>();
    const float ls = one_step(x, y).item<float>();
    ASSERT_NEAR(lp, ls, tol * std::max(1.f, std::abs(ls))) << "step " << i;
    auto vp = parallel.variables(), vs = single.variables();
    ASSERT_EQ(vp.size(), vs.size());
    for (size_t k = 0; k < vp.size(); ++k) expect_near(vp[k], vs[k], tol, vp[k].name() + " step " + std::to_string(i));
  }
  // Every replica holds the same moving statistics.
  for (const Variable& v : {sync_bn.moving_mean(), sync_bn.moving_variance()}) {
    const std::vector<Tensor> values = dp.replica_values(v);
    for (size_t r = 1; r < values.size(); ++r)
      EXPECT_EQ(std::memcmp(raw_data(values[r]), raw_data(values[0]), values[0].nbytes()), 0) << v.name();
  }
}

TEST(FourCpusDataParallel, SyncBatchNormOutsideAStepIsBatchNormalization) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  // Outside a data-parallel step, SyncBatchNormalization is BatchNormalization.
  random::set_seed(2);
  nn::SyncBatchNormalization sync_bn;
  random::set_seed(2);
  nn::BatchNormalization bn;
  Tensor x = batch(8, 3).first;
  Tensor a = sync_bn(x, true), b = bn(x, true);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

}  // namespace
}  // namespace weft
