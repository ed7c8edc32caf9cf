// The benchmarks' model, written as a weft user writes it: an MLP 784-128x3-10 (relu between
// layers), sparse softmax cross-entropy, plain SGD. bench/train_step.cpp runs its step eagerly,
// bench/gpu.cpp traced on a GPU (build it under that GPU's DeviceScope).
#pragma once

#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft::bench {

inline constexpr int64_t kMlpBatch = 256;
inline const std::vector<int64_t> kMlpWidths = {784, 128, 128, 128, 10};

struct WeftMlp {
  std::vector<Variable> weights, biases;
  optim::SGD sgd{0.01};
  WeftMlp() {
    for (size_t i = 0; i + 1 < kMlpWidths.size(); ++i) {
      weights.emplace_back(random::normal({kMlpWidths[i], kMlpWidths[i + 1]}, 0, 0.05, int64_t(i)),
                           "w" + std::to_string(i));
      biases.emplace_back(zeros({kMlpWidths[i + 1]}), "b" + std::to_string(i));
    }
  }
  // One SGD step on (x, y); returns the loss before the update.
  Tensor train_step(const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor h = x;
    for (size_t i = 0; i < weights.size(); ++i) {
      h = add(matmul(h, weights[i]), biases[i]);
      if (i + 1 < weights.size()) h = relu(h);
    }
    Tensor loss = nn::sparse_softmax_cross_entropy(y, h);
    std::vector<Variable> vars = weights;
    vars.insert(vars.end(), biases.begin(), biases.end());
    sgd.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  }
  float step(const Tensor& x, const Tensor& y) { return train_step(x, y).item<float>(); }
};

}  // namespace weft::bench
