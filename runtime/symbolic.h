// What a symbolic tensor points at: an output of a node in a graph being built or traced.
// The graph owns its nodes; the tensor keeps the graph alive through `graph`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace weft {

struct SymbolicRef {
  std::shared_ptr<void> graph;  // the graph the node belongs to (type-erased below the graph layer)
  int64_t node_id = -1;
  int32_t output = 0;
  std::string node_name;
};

}  // namespace weft
