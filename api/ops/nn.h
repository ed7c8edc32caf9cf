// Activations.
//
//   relu(x); sigmoid(x); tanh(x); gelu(x); softmax(logits); log_softmax(logits, /*axis=*/1)
#pragma once

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

Tensor relu(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor sigmoid(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor tanh(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
// The Gaussian error linear unit x Phi(x) (Hendrycks and Gimpel): exact, 0.5 x (1 + erf(x / sqrt 2)),
// or with `approximate` the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's,
// PyTorch's approximate="tanh"). Written with elementwise ops, so a traced function fuses it (and
// its gradient) into FusedElementwise nodes and it differentiates to any order.
Tensor gelu(const Tensor& x, bool approximate = false, const SourceLocation& loc = SourceLocation::current());
// Numerically stable (the max is subtracted first).
Tensor softmax(const Tensor& x, int64_t axis = -1, const SourceLocation& loc = SourceLocation::current());
Tensor log_softmax(const Tensor& x, int64_t axis = -1, const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
