// Kernels: (op, device type, dtype) -> function. A kernel gets its inputs, attributes,
// preallocated outputs and the device (its thread pool or CUDA stream). It knows nothing about
// eager mode, graphs or ranks.
//
// Running one is done one way only, by run_kernel below: eager dispatch, the executor and
// constant folding all call it, so what a device means for a kernel (where its outputs are
// allocated, which pool it uses) is decided here and nowhere else.
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
#include "runtime/pending_value.h"
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
  // For a kRandom op run by an executor: how many times this node ran before in that executor
  // (so in the compiled graph that holds it). 0 in eager mode and for every other op.
  uint64_t execution = 0;
  // What OpDef::prepare derived from this node's attributes, when the caller has it (the executor
  // keeps it per node; eager fusion builds its programs decoded); null: the kernel derives it from
  // `attrs` itself. Its type is the op's: a fused::NodeProgram for FusedElementwise.
  const void* prepared = nullptr;

  const Tensor& input(int i) const { return inputs[i]; }
  Tensor& output(int i) const { return outputs[i]; }
  ThreadPool& pool() const { return device.pool(); }
  // The executor's context; FailedPrecondition for graph-only ops (ReadVariable, If) run eagerly.
  RunContext& run_context() const;
  // Throws InvalidArgument("[display] message"): for errors only the data can reveal
  // (an index out of range, an integer division by zero).
  [[noreturn]] void fail(const std::string& message) const;
};

// InvalidArgument if the op is unknown or the slot is taken (by either kind of kernel).
void register_kernel(std::string_view op, DeviceType device, DType dtype, KernelFn fn);
void register_async_kernel(std::string_view op, DeviceType device, DType dtype, AsyncKernelFn fn);
// The synchronous kernel, or null.
KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype);
// Whether devices of `device` type can run the op for `dtype`: a kernel of either kind.
bool has_kernel(const OpDef& op, DeviceType device, DType dtype);

// One op's kernel for one device type and dtype: synchronous, asynchronous, or (for a view op,
// whose kernel is optional) neither.
struct KernelRef {
  KernelFn sync = nullptr;
  AsyncKernelFn async = nullptr;
  bool found() const { return sync || async; }
};
inline KernelRef find_kernels(const OpDef& op, DeviceType device, DType dtype) {
  return {op.kernel(device, dtype), op.async_kernel(device, dtype)};
}
// InvalidArgument for a missing kernel, worded as kernel_for's.
[[noreturn]] void throw_no_kernel(const OpDef& op, DeviceType device, DType dtype, std::string_view where);
// The kernel to run `op` for `dtype` on devices of type `device`. InvalidArgument naming the op,
// the device type and the dtype, and listing the dtypes that device type has, when there is none
// (a view op needs none). `where` (a node's description) is appended when not empty.
KernelRef kernel_for(const OpDef& op, DeviceType device, DType dtype, std::string_view where = {});

// The dtype that selects an op's kernel: that of input op.kernel_dtype_input, else (-1, or fewer
// inputs) that of output 0. `input_dtype(i)` and `output0` give the node's or call's dtypes.
template <class InputDType>
DType kernel_dtype_of(const OpDef& op, int num_inputs, InputDType&& input_dtype, DType output0) {
  if (op.kernel_dtype_input >= 0 && op.kernel_dtype_input < num_inputs) return input_dtype(op.kernel_dtype_input);
  return output0;
}

// Sets every output the kernel does not set itself (kSetsOutputs): output 0 of a view op is a view
// of input 0; output 0 takes over input `reuse_input`'s buffer when that is >= 0 (the caller has
// checked nobody else reads it); the others are new tensors on `device`. `meta(i)` gives output
// i's dtype and shape.
template <class Meta>
void allocate_outputs(const OpDef& op, Meta&& meta, std::span<const Tensor> ins, std::span<Tensor> outs,
                      Device& device, int reuse_input = -1) {
  if (op.has(kSetsOutputs)) return;
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorMeta& m = meta(i);
    if (i == 0 && op.has(kForwardsInput)) outs[0] = ins[0].view(m.shape);
    else if (i == 0 && reuse_input >= 0) outs[0] = ins[static_cast<size_t>(reuse_input)];
    else outs[i] = Tensor::empty(m.dtype, m.shape, &device);
  }
}

// Runs a synchronous kernel on outputs already allocated, inputs already settled (see below).
inline void run_kernel_into(const OpDef& op, KernelFn fn, Device& device, const Attrs& attrs,
                            std::span<const Tensor> ins, std::span<Tensor> outs, RunContext* run = nullptr,
                            uint64_t execution = 0, const void* prepared = nullptr) {
  KernelContext kc{op, ins, outs, attrs, device, run, execution, prepared};
  KernelRunning running;
  fn(kc);
}

// Runs a synchronous kernel (or a view op's absent one) on `device`: first computes what pending
// values there are (runtime/pending_value.h), then allocates the outputs as
// above, then calls it. `run` is the executor's context, null in eager mode and constant folding;
// `execution` and `prepared` become KernelContext's.
template <class Meta>
void run_kernel(const OpDef& op, KernelFn fn, Device& device, const Attrs& attrs, std::span<const Tensor> ins,
                std::span<Tensor> outs, Meta&& meta, RunContext* run = nullptr, int reuse_input = -1,
                uint64_t execution = 0, const void* prepared = nullptr) {
  settle_before_kernel_if_any(ins);
  allocate_outputs(op, meta, ins, outs, device, reuse_input);
  if (fn) run_kernel_into(op, fn, device, attrs, ins, outs, run, execution, prepared);
}

}  // namespace weft
