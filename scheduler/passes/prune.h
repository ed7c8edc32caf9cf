// prune: removes every node that neither reaches a kept value (the results, the fetches) nor has
// a side effect (variable updates, print), nor is needed by one that does. What TensorFlow does
// to a tf.function whose stateless work reaches no return value.
//
//   int removed = prune(g, g.results, {});
#pragma once

#include <span>

#include "runtime/graph.h"

namespace weft {

// Keeps the producers of `keep_values`, the nodes in `keep_nodes`, every node with the
// kSideEffect flag, the graph's args, and everything those depend on. Returns how many nodes
// were removed.
int prune(GraphIR& g, std::span<const Endpoint> keep_values, std::span<const int32_t> keep_nodes = {});

}  // namespace weft
