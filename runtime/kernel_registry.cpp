#include "runtime/kernel_registry.h"

namespace weft {

void KernelContext::fail(const std::string& message) const {
  throw InvalidArgument("[" + op.display + "] " + message);
}

RunContext& KernelContext::run_context() const {
  if (!run) throw FailedPrecondition("[" + op.display + "] only runs inside a graph (no executor context)");
  return *run;
}

void register_kernel(std::string_view op, DeviceType device, DType dtype, KernelFn fn) {
  OpDef& def = op_registry().mutable_get(op);
  KernelFn& slot = def.kernels[static_cast<int>(device)][static_cast<int>(dtype)];
  if (slot)
    throw InvalidArgument("[kernel_registry] " + std::string(op) + " already has a " + device_type_name(device) +
                          " kernel for " + std::string(dtype_name(dtype)));
  slot = fn;
}

KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype) { return op.kernel(device, dtype); }

}  // namespace weft
