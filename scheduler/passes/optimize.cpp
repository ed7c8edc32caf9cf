// Temporary pipeline until the pass branches land: prune only.
#include "scheduler/passes/optimize.h"

#include "scheduler/passes/prune.h"

namespace weft {

void optimize(GraphIR& g, std::span<const Endpoint> keep_values, std::span<const int32_t> keep_nodes,
              const OptimizeOptions&) {
  (void)keep_values;
  (void)keep_nodes;
  (void)g;
}

}  // namespace weft
