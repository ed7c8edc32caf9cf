#include "scheduler/passes/prune.h"

#include <string>
#include <vector>

namespace weft {

int prune(GraphIR& g, std::span<const Endpoint> keep_values, std::span<const int32_t> keep_nodes) {
  std::vector<int32_t> roots;
  auto keep = [&](int32_t id) {
    if (!g.alive(id))
      throw InvalidArgument("[prune] asked to keep node " + std::to_string(id) + ", which is not in the graph");
    roots.push_back(id);
  };
  for (const Endpoint& e : keep_values) keep(e.node);
  for (const Endpoint& e : g.results) keep(e.node);
  for (int32_t id : keep_nodes) keep(id);
  // Args stay even when unused: they are the function's signature, fed by position.
  for (int32_t id : g.args) keep(id);
  // Initialisers are run by the Session on its own, never through a fetch.
  for (int32_t id : g.initializers) keep(id);
  for (int32_t id : g.node_ids())
    if (has_side_effect(g.node(id))) keep(id);  // subgraphs of If/While count
  // Everything a kept node reads or waits for is kept too, so no kept node is left reading a
  // removed one.
  const std::vector<char> kept = needed_nodes(g, roots);

  std::vector<int32_t> dead;
  for (int32_t id : g.node_ids())
    if (!kept[static_cast<size_t>(id)]) dead.push_back(id);
  g.remove_nodes(dead);  // one walk over the graph, not one per removed node
  return static_cast<int>(dead.size());
}

}  // namespace weft
