#include "runtime/kernel_registry.h"

namespace weft {

void KernelContext::fail(const std::string& message) const {
  throw InvalidArgument("[" + op.display + "] " + message);
}

RunContext& KernelContext::run_context() const {
  if (!run) throw FailedPrecondition("[" + op.display + "] only runs inside a graph (no executor context)");
  return *run;
}

namespace {

OpDef& free_slot(std::string_view op, DeviceType device, DType dtype) {
  OpDef& def = op_registry().mutable_get(op);
  if (has_kernel(def, device, dtype))
    throw InvalidArgument("[kernel_registry] " + std::string(op) + " already has a " + device_type_name(device) +
                          " kernel for " + std::string(dtype_name(dtype)));
  return def;
}

}  // namespace

void register_kernel(std::string_view op, DeviceType device, DType dtype, KernelFn fn) {
  free_slot(op, device, dtype).kernels[static_cast<int>(device)][static_cast<int>(dtype)] = fn;
}

void register_async_kernel(std::string_view op, DeviceType device, DType dtype, AsyncKernelFn fn) {
  free_slot(op, device, dtype).async_kernels[static_cast<int>(device)][static_cast<int>(dtype)] = fn;
}

KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype) { return op.kernel(device, dtype); }

bool has_kernel(const OpDef& op, DeviceType device, DType dtype) {
  return op.kernel(device, dtype) || op.async_kernel(device, dtype);
}

KernelRef kernel_for(const OpDef& op, DeviceType device, DType dtype, std::string_view where) {
  const KernelRef k = find_kernels(op, device, dtype);
  if (!k.found() && !op.has(kForwardsInput)) throw_no_kernel(op, device, dtype, where);
  return k;
}

void throw_no_kernel(const OpDef& op, DeviceType device, DType dtype, std::string_view where) {
  std::string have;
  for (int d = 0; d < kNumDTypes; ++d)
    if (has_kernel(op, device, static_cast<DType>(d))) have += (have.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(d)));
  std::string msg = "[" + op.display + "] has no " + device_type_name(device) + " kernel for dtype " +
                    std::string(dtype_name(dtype)) + " (" + device_type_name(device) + " kernels: " +
                    (have.empty() ? std::string("none") : have) + ")";
  if (!where.empty()) msg += " [" + std::string(where) + "]";
  throw InvalidArgument(msg);
}

}  // namespace weft
