// float16 and bfloat16 on the CPU, for every op that has a float32 CPU kernel and a sensible
// 16-bit meaning: one adapter, not a 16-bit copy of each kernel. The CPU has no 16-bit arithmetic
// (runtime/half.h), so, as PyTorch's CPU does for most ops, the adapter widens the 16-bit inputs to
// float32, runs the op's own float32 kernel, and rounds each float output back to the 16-bit dtype
// once (round to nearest even). Outputs of other dtypes (a comparison's bool, ArgMax's int64) are
// written by the float32 kernel directly. The CUDA kernels compute 16-bit the same way in registers
// (ViaFloat in kernels/cuda/elementwise_ops.cuh), so the two devices agree wherever the float32
// results do.
//
//   register_kernel("Add", DeviceType::CPU, float32, add_k<float>);
//   register_via_float32("Add");   // Add on float16 and bfloat16 too
#pragma once

#include <initializer_list>
#include <string_view>

namespace weft::cpu {

// Registers the CPU kernels of `op` for float16 and bfloat16. Call it after the op's float32 CPU
// kernel is registered: InvalidArgument if there is none, or if the op allocates its outputs
// itself or forwards an input (the adapter needs the preallocated outputs to round into).
void register_via_float32(std::string_view op);
inline void register_via_float32(std::initializer_list<std::string_view> ops) {
  for (std::string_view op : ops) register_via_float32(op);
}

}  // namespace weft::cpu
