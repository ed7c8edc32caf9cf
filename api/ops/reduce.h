// Reductions. axes empty: reduce over every dim. Negative axes count from the end.
//
//   reduce_sum(x);  reduce_mean(x, {1}, /*keepdims=*/true);  argmax(logits, 1)
#pragma once

#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
                  const SourceLocation& loc = SourceLocation::current());
Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
                   const SourceLocation& loc = SourceLocation::current());
Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
                  const SourceLocation& loc = SourceLocation::current());
Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
                  const SourceLocation& loc = SourceLocation::current());
// Index (int64) of the largest value along axis; the first one on ties.
Tensor argmax(const Tensor& x, int64_t axis, const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
