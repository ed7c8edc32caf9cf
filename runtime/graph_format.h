// The graph file format: a GraphIR as a Cap'n Proto message (schema: runtime/proto/graph.capnp),
// behind an 8-byte magic so that any other file is refused with a clear message.
//
//   save_graph("model/graph.capnp", g);          // atomic: temporary file, fsync, rename
//   GraphIR g = load_graph("model/graph.capnp");  // validated before anything can run it
//
// Versions: a file carries the format version that wrote it and the oldest reader version that
// can read it. Fields are only ever added to the schema (with defaults), so older files keep
// loading; a file whose minimum reader version is above kGraphFormatVersion is refused, naming
// both versions.
//
// Files are untrusted. Decoding bounds Cap'n Proto's traversal (in proportion to the file's size)
// and nesting, and the depth of control-flow subgraphs; then every node is checked: a registered
// op, its arity, its attributes (required ones present, each of its declared type), its inputs
// pointing at real outputs, no cycles, names unique, and its outputs as its op's shape function
// infers them from its inputs. Every failure is a DataLoss (the bytes are not a graph) or an
// InvalidArgument (a graph that is wrong), naming the file and the node.
//
// The op registry must be filled before decoding (register_builtin_ops(), which Graph::load
// calls): an op that is not registered is an unknown op.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/graph.h"

namespace weft {

// The version this build writes, and the newest it reads.
inline constexpr uint32_t kGraphFormatVersion = 1;

std::string encode_graph(const GraphIR& g);
// `source` names the bytes in error messages (a path, "<memory>").
GraphIR decode_graph(std::string_view bytes, std::string_view source = "<memory>");

void save_graph(const std::string& path, const GraphIR& g);
GraphIR load_graph(const std::string& path);

}  // namespace weft
