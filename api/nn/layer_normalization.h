// Layer normalisation as a Keras-like layer, on layer_norm (api/ops/normalization.h).
//
//   nn::LayerNormalization norm({.epsilon = 1e-5});
//   Tensor y = norm(x);   // each x[..., :] normalised over the last axis, then * gamma + beta
//
// Checkpoint paths: "layer_normalization/gamma", "layer_normalization/beta" (so
// exclude_from_weight_decay({"layer_normalization"}) finds both).
#pragma once

#include "api/nn/layers.h"

namespace weft::nn {

struct LayerNormOptions {
  double epsilon = 1e-5;  // PyTorch's and nanoGPT's (Keras's is 1e-3)
  bool center = true;     // a trainable offset beta (zeros); without it, none
  bool scale = true;      // a trainable factor gamma (ones); without it, none
};

// Normalises each row of x (the last axis) by its own mean and (biased) variance, then scales by
// gamma and shifts by beta, both of the last dimension, built on the first call. The same in
// training and inference: there are no moving statistics, so eager, traced, Session and
// data-parallel runs need nothing special. float16 / bfloat16 inputs keep float32 gamma and beta
// (and statistics), as mixed-precision layers keep float32 variables; float64 inputs float64.
class LayerNormalization : public Module {
 public:
  explicit LayerNormalization(LayerNormOptions options = {});
  // Undefined before the first call (and without scale / center).
  Variable gamma() const;
  Variable beta() const;
};

}  // namespace weft::nn
