// The pass pipeline applied to every traced function and Session graph:
// prune -> constant_fold -> cse -> fuse_elementwise -> prune.
#pragma once

#include <span>

#include "runtime/graph.h"

namespace weft {

struct OptimizeOptions {
  bool constant_folding = true;
  bool cse = true;
  bool fusion = true;
  // The fusions only CPU kernels run (a relu folded into a batch norm, or into max pooling's
  // gradient): fusion runs before placement, so the graph compiler turns them off when a GPU
  // might take the fused node.
  bool cpu_only_fusions = true;
};

// `keep_values`/`keep_nodes` as for prune (the graph's results are always kept). Folding and CSE
// may replace the producer of a kept value, leaving the caller's endpoint stale: a caller that
// fetches by endpoint afterwards puts the values in g.results, which the passes rewrite.
void optimize(GraphIR& g, std::span<const Endpoint> keep_values, std::span<const int32_t> keep_nodes = {},
              const OptimizeOptions& options = {});

}  // namespace weft
