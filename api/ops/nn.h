// Activations.
//
//   relu(x); sigmoid(x); tanh(x); softmax(logits); log_softmax(logits, /*axis=*/1)
#pragma once

#include "api/dispatch.h"

namespace weft {

Tensor relu(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor sigmoid(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor tanh(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
// Numerically stable (the max is subtracted first).
Tensor softmax(const Tensor& x, int64_t axis = -1, const SourceLocation& loc = SourceLocation::current());
Tensor log_softmax(const Tensor& x, int64_t axis = -1, const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
