// The user's side of eager fusion (api/eager_fusion.h says what it does): the mode, and computing
// pending tensors at a point of the program's choosing.
//
//   weft::set_eager_fusion(weft::EagerFusion::All);   // also on CPUs (default: GPUs only)
//   weft::evaluate(y);                                 // issue y's fused kernel now
#pragma once

#include <span>

#include "runtime/tensor.h"

namespace weft {

enum class EagerFusion {
  Off,   // every eager op runs when it is called
  Gpus,  // elementwise ops on GPUs are deferred and fused (the default)
  All,   // on every device
};

// Sets the mode for the process; WEFT_EAGER_FUSION=off|gpus|all in the environment sets the
// starting one (an unknown value is an InvalidArgument naming it at the first eager op).
void set_eager_fusion(EagerFusion mode);
EagerFusion eager_fusion();

// Computes the pending tensors among `tensors` now (on a GPU: queues their kernels, waiting for
// nothing); others are left as they are. Reading a tensor computes it anyway: this is for code
// that wants the work issued at a point of its choosing, as MLX's eval(), or benchmarks, do.
void evaluate(std::span<const Tensor> tensors);
inline void evaluate(const Tensor& t) { evaluate(std::span<const Tensor>(&t, 1)); }

}  // namespace weft
