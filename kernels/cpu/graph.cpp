// CPU kernels of the graph-only ops: constants and variable access through the executor's
// RunContext. Values are shared, never copied, except where a write needs a private buffer.
#include <cstring>
#include <type_traits>

#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

bool exclusively_owned(const Tensor& t) {
  const TensorImpl* impl = t.impl();
  return impl->ref_count() == 1 && impl->buffer && impl->buffer->ref_count() == 1;
}

Tensor copy_of(const Tensor& t) {
  Tensor out = Tensor::empty(t.dtype(), t.shape(), t.device_ptr());
  if (t.nbytes()) t.device_ptr()->copy_on_device(t.raw_data(), out.raw_data(), t.nbytes());
  return out;
}

VariableState& initialised(KernelContext& ctx) {
  const std::string& name = ctx.attrs.get<std::string>("var");
  VariableState& v = ctx.run_context().variable(name);
  if (!v.value.defined())
    throw FailedPrecondition("[" + ctx.op.display + "] variable '" + name +
                             "' is read before it was initialised (run its initializer first)");
  return v;
}

void check_same_shape(KernelContext& ctx, const VariableState& v, const Tensor& value) {
  if (value.shape() != v.value.shape())
    ctx.fail("variable '" + v.name + "' has shape " + v.value.shape().to_string() + ", the value has shape " +
             value.shape().to_string());
}

void constant(KernelContext& ctx) { ctx.output(0) = ctx.attrs.get<Tensor>("value"); }

void read_variable(KernelContext& ctx) { ctx.output(0) = initialised(ctx).value; }

void read_variable_for_update(KernelContext& ctx) {
  VariableState& v = initialised(ctx);
  if (!exclusively_owned(v.value)) v.value = copy_of(v.value);
  ctx.output(0) = v.value;
}

// A variable keeps the assigned tensor itself: every in-place writer checks exclusive ownership
// first, so sharing the buffer with the graph value it came from is safe.
void assign_variable(KernelContext& ctx) {
  const std::string& name = ctx.attrs.get<std::string>("var");
  VariableState& v = ctx.run_context().variable(name);
  if (v.value.defined()) check_same_shape(ctx, v, ctx.input(0));
  v.value = ctx.input(0);
}

template <class T, bool kAdd>
void assign_update(KernelContext& ctx) {
  VariableState& v = initialised(ctx);
  const Tensor& delta = ctx.input(0);
  check_same_shape(ctx, v, delta);
  if (!exclusively_owned(v.value)) v.value = copy_of(v.value);
  T* w = v.value.data<T>();
  const T* d = delta.data<T>();
  const int64_t n = v.value.size();
  ctx.pool().parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) w[i] = kAdd ? static_cast<T>(w[i] + d[i]) : static_cast<T>(w[i] - d[i]);
  });
}

void no_op(KernelContext&) {}

}  // namespace

void register_graph_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    register_kernel("Const", DeviceType::CPU, dt, constant);
    register_kernel("ReadVariable", DeviceType::CPU, dt, read_variable);
    register_kernel("ReadVariableForUpdate", DeviceType::CPU, dt, read_variable_for_update);
    register_kernel("AssignVariable", DeviceType::CPU, dt, assign_variable);
    if (dt == DType::Bool) continue;
    visit_dtype(dt, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_arithmetic_v<T>) {
        register_kernel("AssignAddVariable", DeviceType::CPU, dt, assign_update<T, true>);
        register_kernel("AssignSubVariable", DeviceType::CPU, dt, assign_update<T, false>);
      }
    });
  }
  register_kernel("NoOp", DeviceType::CPU, DType::Float32, no_op);
}

}  // namespace weft::cpu
