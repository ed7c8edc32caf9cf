// Kernels: (op, device type, dtype) -> function. A kernel gets its inputs, attributes,
// preallocated outputs and the device (its thread pool or CUDA stream). It knows nothing about
// eager mode, graphs or ranks.
//
//   void relu_f32(KernelContext& ctx) {
//     const float* x = ctx.input(0).data<float>();
//     float* y = ctx.output(0).data<float>();
//     ...
//   }
//   register_kernel("Relu", DeviceType::CPU, float32, relu_f32);
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "runtime/attr.h"
#include "runtime/device.h"
#include "runtime/op_registry.h"
#include "runtime/run_context.h"
#include "runtime/tensor.h"

namespace weft {

struct KernelContext {
  const OpDef& op;
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  const Attrs& attrs;
  Device& device;
  RunContext* run = nullptr;  // not owned; set by executors, null in eager mode

  const Tensor& input(int i) const { return inputs[i]; }
  Tensor& output(int i) const { return outputs[i]; }
  ThreadPool& pool() const { return device.pool(); }
  // The executor's context; FailedPrecondition for graph-only ops (ReadVariable, If) run eagerly.
  RunContext& run_context() const;
  // Throws InvalidArgument("[display] message"): for errors only the data can reveal
  // (an index out of range, an integer division by zero).
  [[noreturn]] void fail(const std::string& message) const;
};

// InvalidArgument if the op is unknown or the slot is taken.
void register_kernel(std::string_view op, DeviceType device, DType dtype, KernelFn fn);
// The kernel, or null.
KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype);

}  // namespace weft
