// Keras-like layers.
//
//   nn::Dense(128, nn::relu)   // kernel (in, 128) built on first call from x's last dim,
//                              // Glorot-uniform kernel, zero bias
//   nn::Dropout(0.2)           // active only when called with training = true
//   nn::Sequential{...}        // calls its layers in order
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <vector>

#include "api/nn/module.h"

namespace weft::nn {

using Activation = std::function<Tensor(const Tensor&)>;

// Activation functions usable as layer arguments.
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact (erf); weft::gelu(x, true) for the tanh approximation
Tensor softmax(const Tensor& x);

class Dense : public Module {
 public:
  explicit Dense(int64_t units, Activation activation = nullptr, bool use_bias = true);
  // Built on first call; undefined Variables before that.
  Variable kernel() const;
  Variable bias() const;
};

class Dropout : public Module {
 public:
  // Zeroes each element with probability `rate` while training and scales the rest by
  // 1 / (1 - rate); the identity otherwise. A seed makes the masks reproducible.
  explicit Dropout(double rate, std::optional<int64_t> seed = std::nullopt);
};

// relu as a layer of its own (Keras's layers.ReLU), for a model that puts an activation after a
// layer that has none (a convolution followed by batch normalisation).
class ReLU : public Module {
 public:
  ReLU();
};

class Sequential : public Module {
 public:
  Sequential(std::initializer_list<Module> layers);
  explicit Sequential(std::vector<Module> layers);
  void add(const Module& layer);
  const std::vector<Module>& layers() const;
};

}  // namespace weft::nn
