// OpObserver: what sees every eagerly executed op (GradientTape implements it). Apart from the
// eager context (api/context.h) so that the public GradientTape needs neither the op registry nor
// attribute values, only their names.
#pragma once

#include <span>

#include "runtime/tensor.h"

namespace weft {

class Attrs;
struct OpDef;

// Receives every eagerly executed op while installed (api/context.h installs observers).
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_op(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                     const Attrs& attrs) = 0;
};

}  // namespace weft
