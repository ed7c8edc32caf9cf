// Batch normalisation over the channels (last axis) of NHWC images or [N, C] matrices, as one op
// (TensorFlow's FusedBatchNormV3).
//
//   // training: normalised by this batch's statistics, which are returned for the moving averages
//   BatchNormResult r = fused_batch_norm(x, gamma, beta, {}, {}, 1e-3, /*training=*/true);
//   // inference: normalised by the given statistics
//   Tensor y = fused_batch_norm(x, gamma, beta, moving_mean, moving_variance, 1e-3, false).y;
//
// gamma, beta, mean and variance are [C] vectors of float32 (float64 for float64 x); x may be
// float16 or bfloat16, whose statistics are kept in float32. In training, batch_variance is the
// biased (population) variance used to normalise; moving averages in Keras also take it.
#pragma once

#include "api/dispatch.h"

namespace weft {

struct BatchNormResult {
  Tensor y;
  Tensor batch_mean;      // [C]; in inference, the given mean
  Tensor batch_variance;  // [C]; in inference, the given variance
};

// mean and variance are ignored (and may be default-constructed Tensors) when training.
BatchNormResult fused_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                 const Tensor& variance, double epsilon = 1e-3, bool training = true,
                                 const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
