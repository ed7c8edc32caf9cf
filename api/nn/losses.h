// Losses, averaged over the batch.
//
//   Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);   // labels int32/int64/uint8
//   Tensor mse = nn::mean_squared_error(y_true, y_pred);
#pragma once

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft::nn {

// Mean over the batch of -log softmax(logits)[label]; fused and numerically stable. A label
// outside [0, classes) is an InvalidArgument naming it.
Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const SourceLocation& loc = SourceLocation::current());
// Mean of (y_pred - y_true)^2 over every element.
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred,
                          const SourceLocation& loc = SourceLocation::current());

}  // namespace weft::nn
