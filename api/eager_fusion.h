// Eager fusion: elementwise ops called eagerly are deferred and fused, so that relu(a + b) on a
// GPU is one kernel launch, not two, as it is once traced.
//
//   weft::set_eager_fusion(weft::EagerFusion::All);   // also on CPUs (default: GPUs only)
//   Tensor y = relu(a + b);     // nothing runs yet: y is pending on the program {Add, Relu}
//   y.to_vector<float>();       // one FusedElementwise computes y; a + b is never stored
//
// An eager op whose kernel FusedElementwise can stand for (the float elementwise ops of
// kernels/defs/fused.h, on float32 and float64) returns a pending tensor (runtime/pending_value.h):
// dtype, shape, device and buffer as usual, contents computed at the first read. An op reading a
// pending operand of its own shape takes the operand's program into its own instead of reading
// it. A pending tensor is computed when anything reads it, and every pending tensor anything
// still holds is computed before any other kernel runs; one that nothing holds any longer is
// never computed. The results are those of the separate ops, bit for bit: each opcode of
// FusedElementwise computes what its op's kernel computes, on the CPU and on the GPU.
//
// Why GPUs only by default: a GPU op's cost is its launch (microseconds), which fusion saves; a
// CPU op on small tensors costs a fraction of a microsecond, about what deferring it costs.
// On large CPU tensors fusion saves memory passes; EagerFusion::All is for those programs.
#pragma once

#include <span>

#include "api/eager_fusion_mode.h"
#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {

// The pending result of eager op `op` on `inputs` (already on `device`), whose one output
// `ic` inferred, when the op can be deferred there; else an undefined Tensor and nothing done.
// Called by the eager dispatcher only.
Tensor defer_elementwise(const OpDef& op, std::span<const Tensor> inputs, const InferContext& ic, Device& device);

}  // namespace weft
