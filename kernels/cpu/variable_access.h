// How the variable kernels (kernels/cpu/graph.cpp, kernels/cuda/variables.cu) reach a variable's
// value through the executor's RunContext, on any device. Header only.
//
// Placement puts a variable and every op that reads or assigns it on one device, so a variable
// read by kernels of a GPU lives in that GPU's memory and is updated there in place. Its value may
// still start elsewhere (a Variable made eagerly on the CPU, then used by a graph placed on the
// GPU): the first kernel that touches it on another memory moves it there, once.
#pragma once

#include <mutex>
#include <string>

#include "runtime/device_transfer.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"
#include "runtime/variable_state.h"

namespace weft::cpu {

// Guards every replacement of a VariableState's tensor by the variable kernels, which may run on
// several executor threads at once.
inline std::mutex& variable_mutex() {
  static std::mutex mu;
  return mu;
}

inline bool exclusively_owned(const Tensor& t) {
  const TensorImpl* impl = tensor_impl(t);
  return impl->ref_count() == 1 && impl->buffer && impl->buffer->ref_count() == 1;
}

inline Tensor copy_of(const Tensor& t) {
  Tensor out = Tensor::empty(t.dtype(), t.shape(), t.device_ptr());
  if (t.nbytes()) t.device_ptr()->copy_on_device(raw_data(t), raw_data(out), t.nbytes());
  return out;
}

inline VariableState& initialised(KernelContext& ctx) {
  const std::string& name = ctx.attrs.get<std::string>("var");
  VariableState& v = ctx.run_context().variable(name);
  if (!v.value.defined())
    throw FailedPrecondition("[" + ctx.op.display + "] variable '" + name +
                             "' is read before it was initialised (run its initializer first)");
  return v;
}

inline void check_same_shape(KernelContext& ctx, const VariableState& v, const Tensor& value) {
  if (value.shape() != v.value.shape())
    ctx.fail("variable '" + v.name + "' has shape " + v.value.shape().to_string() + ", the value has shape " +
             value.shape().to_string());
}

// The variable's value, moved first to ctx's device when that cannot reach it, and with
// `for_update`, made private to the variable (copied if anything else holds it) so that a kernel
// may write it in place. The returned handle stays valid until the variable is next assigned.
// Every read of every step comes here, so only the move, which happens once per variable (its
// nodes share one device), takes the lock.
inline const Tensor& placed_value(KernelContext& ctx, VariableState& v, bool for_update) {
  if (!readable_on(&ctx.device, v.value)) {
    std::lock_guard<std::mutex> lock(variable_mutex());
    if (!readable_on(&ctx.device, v.value)) v.value = v.value.to(&ctx.device);
  } else if (for_update && !exclusively_owned(v.value)) {
    v.value = copy_of(v.value);
  }
  return v.value;
}

// Registers Const, ReadVariable, ReadVariableForUpdate, AssignVariable (every dtype) and NoOp for
// `type`: they only hand buffers over, so one implementation serves every device (graph.cpp).
void register_buffer_graph_kernels(DeviceType type);

}  // namespace weft::cpu
