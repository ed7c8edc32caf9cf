// Gradient clipping by the global norm, as tf.clip_by_global_norm:
//
//   auto [clipped, global_norm] = clip_by_global_norm(tape.gradient(loss, vars), /*clip_norm=*/1.0);
//   opt.apply_gradients(clipped, vars);
//
// global_norm = sqrt(sum of the squares of every element of every gradient), computed by one op
// over all of them (GlobalSquaredNorm); when it exceeds clip_norm every gradient is scaled by
// clip_norm / global_norm, so their directions are kept. Eager and traced alike. In a DataParallel
// step the gradients clipped are the replica's own, before apply_gradients all-reduces them (as in
// a TensorFlow custom training loop under MirroredStrategy).
#pragma once

#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

struct ClippedGradients {
  std::vector<Tensor> clipped;  // an undefined gradient stays undefined
  Tensor global_norm;           // a scalar of the gradients' dtype, before clipping
};

// Each gradient times clip_norm / max(global_norm, clip_norm): exactly the gradients when the norm
// is within clip_norm. A non-finite global norm makes every clipped gradient NaN (as TensorFlow
// does), so a bad step shows instead of being scaled to zero. InvalidArgument unless clip_norm is
// positive and finite and the defined gradients share one floating dtype.
ClippedGradients clip_by_global_norm(const std::vector<Tensor>& grads, double clip_norm,
                                     const SourceLocation& loc = SourceLocation::current());

// sqrt of the sum of squares of every element of every defined tensor (tf.linalg.global_norm); a
// float32 zero when none is defined.
Tensor global_norm(const std::vector<Tensor>& tensors, const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
