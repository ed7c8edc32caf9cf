#include "scheduler/passes/optimize.h"

#include <vector>

#include "scheduler/passes/constant_fold.h"
#include "scheduler/passes/cse.h"
#include "scheduler/passes/fuse_elementwise.h"
#include "scheduler/passes/prune.h"

namespace weft {

void optimize(GraphIR& g, std::span<const Endpoint> keep_values, std::span<const int32_t> keep_nodes,
              const OptimizeOptions& options) {
  // Folding and CSE replace nodes; the kept values ride along at the end of g.results, which
  // they rewire, so the last prune keeps their new producers. The caller's own copies of
  // `keep_values` are not updated: a caller that needs the rewritten endpoints puts them in
  // g.results itself.
  const size_t num_results = g.results.size();
  g.results.insert(g.results.end(), keep_values.begin(), keep_values.end());
  // Pruning first spares the later passes dead work (folding a constant nobody reads).
  prune(g, {}, keep_nodes);
  if (options.constant_folding) constant_fold(g);
  if (options.cse) eliminate_common_subexpressions(g);
  if (options.fusion) fuse_elementwise(g, options.cpu_only_fusions);
  // Folding and merging leave their old inputs without readers. A kept node that was folded
  // or merged away was stateless, so running its replacement (or nothing) loses no effect.
  std::vector<int32_t> still_there;
  for (int32_t id : keep_nodes)
    if (g.alive(id)) still_there.push_back(id);
  prune(g, {}, still_there);
  g.results.resize(num_results);
}

}  // namespace weft
