// SourceLoc: where user code created a graph node, as Operation::source_location() gives it to
// users; apart from the graph IR (runtime/graph.h) so the public header needs only this.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

// Where user code created a node; kept as strings because loaded graphs have no
// std::source_location to point at.
struct SourceLoc {
  std::string file;
  std::string function;
  uint32_t line = 0;
  bool known() const { return line != 0 || !file.empty(); }
  std::string to_string() const;  // "train.cpp:42" (the file's last path component)
};

}  // namespace weft
