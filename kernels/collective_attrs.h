// The attributes of the collective ops (kernels/defs/collective.cpp) read into the collective
// executor's parameters, checked once: by the ops' infer functions when a node is made, and again
// by the kernels (cheap: a few attributes and a short string).
#pragma once

#include <string>

#include "runtime/collectives.h"
#include "runtime/attr.h"
#include "runtime/op_registry.h"

namespace weft {

// InvalidArgument "[display] ..." for a bad attribute: a bad member list, member or root out of
// range, instance_key not below group_instances, group_instances < 1, an unknown reduction, a
// broadcast whose inputs do not fit the member's role.
CollectiveParams collective_params(CollectiveKind kind, const std::string& display, const Attrs& attrs,
                                   int num_inputs);

// A collective runs on a GPU only through NCCL, which needs the group's id on the node (the
// "nccl_id" attribute; kernels/cuda/collective.cpp). For one without it, placement
// (scheduler/passes/place.cpp) and eager dispatch (api/dispatch.cpp) act as if there were no CUDA
// kernel: it runs on a CPU of its task, a host collective fed by Send/Recv (or an eager copy).
// The rule sits here, on the node's attributes, so the kernel registry stays keyed by
// (op, device type, dtype) alone.
inline bool collective_needs_host(const OpDef& op, const Attrs& attrs) {
  return op.name.starts_with("Collective") && !attrs.find("nccl_id");
}

}  // namespace weft
