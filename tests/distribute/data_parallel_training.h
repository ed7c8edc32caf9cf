// Shared by the data-parallel tests of one process, of logical CPUs and under mpirun: train a
// small classifier with DataParallel and, beside it in this process, the same model with
// weft::function on the same global batches, and compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "api/distribute/data_parallel.h"
#include "api/function.h"
#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/nn/losses.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"
#include "api/optim/optimizers.h"

namespace weft::testing {

struct Classifier {
  nn::Sequential model{nn::Dense(32, nn::relu), nn::Dense(32, nn::relu), nn::Dense(5)};
};

// A batch of `rows` examples with 12 features and 5 classes, different for each `seed`.
inline std::pair<Tensor, Tensor> classifier_batch(int64_t rows, int seed) {
  Tensor x = random::normal({rows, 12}, 0, 1, seed);
  Tensor y = cast(random::uniform({rows}, 0, 4.999, seed + 1000), int32);
  return {x, y};
}

// Gives `b` the weights of `a` (both built on `x` first).
inline void copy_weights(Classifier& a, Classifier& b, const Tensor& x) {
  a.model(x, false);
  b.model(x, false);
  auto va = a.model.trainable_variables(), vb = b.model.trainable_variables();
  for (size_t i = 0; i < va.size(); ++i) vb[i].assign(va[i].value());
}

template <class Opt>
Tensor train_step(Classifier& c, Opt& opt, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor loss = nn::sparse_softmax_cross_entropy(y, c.model(x, true));
  auto vars = c.model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

// Trains `steps` steps with batches of `rows(step)` rows through `dp` and through weft::function
// in this process; the losses and the weights agree to 1e-5 relative after every step.
template <class MakeOpt>
void expect_data_parallel_matches_one_process(distribute::DataParallel& dp, MakeOpt make_opt, int steps,
                                              const std::function<int64_t(int)>& rows) {
  Classifier parallel, single;
  copy_weights(single, parallel, classifier_batch(4, 1).first);
  auto opt_p = make_opt();
  auto opt_s = make_opt();
  auto dp_step = dp.function([&](Tensor x, Tensor y) { return train_step(parallel, opt_p, x, y); });
  auto one_step = function([&](Tensor x, Tensor y) { return train_step(single, opt_s, x, y); },
                           FunctionOptions{.relax_shapes = true});
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = classifier_batch(rows(step), 100 + step);
    const float lp = dp_step(x, y).template item<float>();
    const float ls = one_step(x, y).template item<float>();
    ASSERT_NEAR(lp, ls, 1e-5f * std::max(1.f, std::abs(ls))) << "step " << step;
    auto vp = parallel.model.trainable_variables(), vs = single.model.trainable_variables();
    ASSERT_EQ(vp.size(), vs.size());
    for (size_t i = 0; i < vp.size(); ++i) {
      auto a = vp[i].value().template to_vector<float>(), b = vs[i].value().template to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k)
        ASSERT_NEAR(a[k], b[k], 1e-5f * std::max(1.f, std::abs(b[k]))) << "variable " << vp[i].name() << " step " << step;
    }
  }
  EXPECT_EQ(dp_step.tracing_count(), 1);
  EXPECT_EQ(opt_p.iterations(), steps);
}

}  // namespace weft::testing
