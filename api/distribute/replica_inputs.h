// ReplicaInputs: how each replica of a data-parallel step reads its own arguments. Apart from
// replication (api/distribute/replicate.h, which needs the graph IR) so that the public
// DataParallel header needs only this.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace weft::distribute {

// Inputs read where each replica runs: called while the global graph records, under a
// DeviceScope of replica `replica`'s device, it adds the nodes that read that replica's share of
// the next global batch and returns one tensor per argument of the trace, the weight last.
using ReplicaInputs = std::function<std::vector<Tensor>(int64_t replica, int64_t replicas)>;

}  // namespace weft::distribute
