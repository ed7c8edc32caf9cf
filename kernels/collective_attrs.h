// The attributes of the collective ops (kernels/defs/collective.cpp) read into the collective
// executor's parameters, checked once: by the ops' infer functions when a node is made, and again
// by the kernels (cheap: a few attributes and a short string).
#pragma once

#include <string>

#include "comm/collective_executor.h"
#include "runtime/attr.h"

namespace weft {

// InvalidArgument "[display] ..." for a bad attribute: a bad member list, member or root out of
// range, instance_key not below group_instances, group_instances < 1, an unknown reduction, a
// broadcast whose inputs do not fit the member's role.
CollectiveParams collective_params(CollectiveKind kind, const std::string& display, const Attrs& attrs,
                                   int num_inputs);

}  // namespace weft
