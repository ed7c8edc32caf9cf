// Normalisation as single ops: batch normalisation over the channels (last axis) of NHWC images
// or [N, C] matrices (TensorFlow's FusedBatchNormV3), and layer normalisation over each row.
//
//   // training: normalised by this batch's statistics, which are returned for the moving averages
//   BatchNormResult r = fused_batch_norm(x, gamma, beta, {}, {}, 1e-3, /*training=*/true);
//   // inference: normalised by the given statistics
//   Tensor y = fused_batch_norm(x, gamma, beta, moving_mean, moving_variance, 1e-3, false).y;
//
// gamma, beta, mean and variance are [C] vectors of float32 (float64 for float64 x); x may be
// float16 or bfloat16, whose statistics are kept in float32. In training, batch_variance is the
// biased (population) variance used to normalise; moving averages in Keras also take it.
//
//   // each x[..., :] normalised by its own mean and variance, then scaled and shifted
//   Tensor y = layer_norm(x, gamma, beta, /*axis=*/-1, /*epsilon=*/1e-5);
#pragma once

#include "api/source_location.h"
#include "runtime/tensor.h"

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

// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, the mean and (biased) variance taken
// over the trailing axes from `axis` (the last only, by default) of each row; gamma and beta have
// those axes' shape, x.shape[axis:]. They are float32 for float32, float16 and bfloat16 x (whose
// statistics are float32 too), float64 for float64 x. One op (LayerNorm), its gradient another
// (LayerNormGrad), differentiable in turn. InvalidArgument, before anything runs, for another
// gamma / beta shape or dtype, an axis out of range, epsilon <= 0 or not finite, or integer x.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis = -1, double epsilon = 1e-5,
                  const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
