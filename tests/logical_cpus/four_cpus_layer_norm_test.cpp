// nn::LayerNormalization under DataParallel in one process of four logical CPUs (FourCpus suite,
// WEFT_LOGICAL_CPUS=4): each example is normalised on its own, so four replicas on uneven shards
// train like one process on the same global batches, and their gamma and beta stay identical.
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
  Tensor x = add(mul(random::normal({rows, 12}, 0, 1, seed), 3.0), 1.5);
  Tensor y = cast(random::uniform({rows}, 0, 4.999, seed + 1000), int32);
  return {x, y};
}

nn::Sequential model(const nn::LayerNormalization& norm) {
  return nn::Sequential{nn::Dense(16), norm, nn::ReLU(), nn::Dense(5)};
}

Tensor train_step(nn::Sequential& m, optim::SGD& opt, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor loss = nn::sparse_softmax_cross_entropy(y, m(x, true));
  auto vars = m.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

TEST(FourCpusLayerNorm, DataParallelTrainsLikeOneProcess) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  ASSERT_EQ(dp.num_replicas(), 4);
  nn::LayerNormalization norm_p, norm_s;
  nn::Sequential parallel = model(norm_p), single = model(norm_s);
  const Tensor probe = batch(2, 1).first;
  parallel(probe);
  single(probe);
  auto vp = parallel.trainable_variables(), vs = single.trainable_variables();
  ASSERT_EQ(vp.size(), vs.size());
  for (size_t k = 0; k < vp.size(); ++k) vp[k].assign(vs[k].value());
  optim::SGD opt_p(0.1), opt_s(0.1);
  auto dp_step = dp.function([&](Tensor x, Tensor y) { return train_step(parallel, opt_p, x, y); });
  auto one_step = function([&](Tensor x, Tensor y) { return train_step(single, opt_s, x, y); },
                           FunctionOptions{.relax_shapes = true});
  for (int i = 0; i < 4; ++i) {
    auto [x, y] = batch(21 + i, 40 + i);  // uneven shards
    const float lp = dp_step(x, y).item<float>();
    const float ls = one_step(x, y).item<float>();
    ASSERT_NEAR(lp, ls, 1e-5f * std::max(1.f, std::abs(ls))) << "step " << i;
    for (size_t k = 0; k < vp.size(); ++k) {
      const std::vector<float> a = vp[k].value().to_vector<float>(), b = vs[k].value().to_vector<float>();
      for (size_t e = 0; e < a.size(); ++e)
        ASSERT_NEAR(a[e], b[e], 1e-5f * std::max(1.f, std::abs(b[e]))) << vp[k].name() << " step " << i;
    }
  }
  // Every replica holds the same gamma and beta, which trained.
  for (const Variable& v : {norm_p.gamma(), norm_p.beta()}) {
    const std::vector<Tensor> values = dp.replica_values(v);
    ASSERT_EQ(values.size(), 4u);
    for (size_t r = 1; r < values.size(); ++r)
      EXPECT_EQ(std::memcmp(raw_data(values[r]), raw_data(values[0]), values[0].nbytes()), 0)
          << v.name() << " differs on replica " << r;
  }
  EXPECT_GT(reduce_max(abs(norm_p.beta().value())).item<float>(), 1e-4f);
}

}  // namespace
}  // namespace weft
