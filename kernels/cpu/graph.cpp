// CPU kernels of the graph-only ops: constants and variable access through the executor's
// RunContext. Values are shared, never copied, except where a write needs a private buffer or the
// value must move to the node's device (variable_access.h). All but AssignAdd/SubVariable only hand
// buffers over and serve the CUDA device too.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/variable_access.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

// The captured value, on the node's device. Where that is a GPU, executors upload it once when
// they are made (Executor::Step::preloaded) and do not call this; eager and other callers get a
// copy each time.
void constant(KernelContext& ctx) {
  const Tensor& value = ctx.attrs.get<Tensor>("value");
  ctx.output(0) = readable_on(&ctx.device, value) ? value : value.to(&ctx.device);
}

void read_variable(KernelContext& ctx) {
  VariableState& v = initialised(ctx);
  ctx.output(0) = placed_value(ctx, v, /*for_update=*/false);
}

void read_variable_for_update(KernelContext& ctx) {
  VariableState& v = initialised(ctx);
  ctx.output(0) = placed_value(ctx, v, /*for_update=*/true);
}

// A variable keeps the assigned tensor itself: every in-place writer checks exclusive ownership
// first, so sharing the buffer with the graph value it came from is safe.
void assign_variable(KernelContext& ctx) {
  const std::string& name = ctx.attrs.get<std::string>("var");
  VariableState& v = ctx.run_context().variable(name);
  if (v.value.defined()) check_same_shape(ctx, v, ctx.input(0));
  std::lock_guard<std::mutex> lock(variable_mutex());
  v.value = ctx.input(0);
}

template <class T, bool kAdd>
void assign_update(KernelContext& ctx) {
  VariableState& v = initialised(ctx);
  const Tensor& delta = ctx.input(0);
  check_same_shape(ctx, v, delta);
  T* w = placed_value(ctx, v, /*for_update=*/true).data<T>();
  const T* d = delta.data<T>();
  const int64_t n = v.value.size();
  ctx.pool().parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) w[i] = kAdd ? static_cast<T>(w[i] + d[i]) : static_cast<T>(w[i] - d[i]);
  });
}

void no_op(KernelContext&) {}

}  // namespace

void register_buffer_graph_kernels(DeviceType type) {
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    register_kernel("Const", type, dt, constant);
    register_kernel("ReadVariable", type, dt, read_variable);
    register_kernel("ReadVariableForUpdate", type, dt, read_variable_for_update);
    register_kernel("AssignVariable", type, dt, assign_variable);
  }
  register_kernel("NoOp", type, DType::Float32, no_op);
}

void register_graph_kernels() {
  register_buffer_graph_kernels(DeviceType::CPU);
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    if (dt == DType::Bool) continue;
    visit_dtype(dt, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_arithmetic_v<T>) {
        register_kernel("AssignAddVariable", DeviceType::CPU, dt, assign_update<T, true>);
        register_kernel("AssignSubVariable", DeviceType::CPU, dt, assign_update<T, false>);
      }
    });
  }
}

}  // namespace weft::cpu
