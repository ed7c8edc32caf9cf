// Graph::to_dot: a Graphviz picture of a graph, one cluster and one fill colour per device.
#include <iterator>
#include <map>
#include <sstream>

#include "runtime/graph.h"

namespace weft {

namespace {
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string label(const GraphIR& g, const Node& n) {
  std::string l = n.name + "\\n" + n.type();
  if (!n.outputs.empty()) l += "\\n" + std::string(dtype_name(n.outputs[0].dtype)) + n.outputs[0].shape.to_string();
  (void)g;
  return l;
}
}  // namespace

std::string GraphIR::to_dot() const {
  std::ostringstream os;
  os << "digraph weft {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n";
  std::map<std::string, std::vector<const Node*>> by_device;
  for (const auto& n : nodes_)
    if (n) by_device[n->assigned_device.empty() ? n->requested_device : n->assigned_device].push_back(n.get());
  // One fill colour per device (pastels, so labels stay readable), in device-name order.
  static constexpr const char* kFills[] = {"#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd",
                                           "#d0e0e3", "#ead1dc", "#c9daf8", "#b6d7a8", "#ffe599", "#ea9999"};
  int cluster = 0;
  for (const auto& [device, nodes] : by_device) {
    const bool boxed = !device.empty();
    const char* fill = kFills[cluster % std::size(kFills)];
    if (boxed) os << "  subgraph cluster_" << cluster++ << " {\n    label=" << quoted(device) << ";\n";
    for (const Node* n : nodes) {
      os << (boxed ? "    " : "  ") << "n" << n->id << " [label=" << quoted(label(*this, *n));
      if (boxed) os << ", style=\"rounded,filled\", fillcolor=\"" << fill << "\"";
      if (n->op->has(kStateful)) os << ", color=firebrick";
      os << "];\n";
    }
    if (boxed) os << "  }\n";
  }
  for (const auto& n : nodes_) {
    if (!n) continue;
    for (const Endpoint& e : n->inputs) {
      os << "  n" << e.node << " -> n" << n->id;
      const TensorMeta& m = meta(e);
      os << " [label=" << quoted(std::string(dtype_name(m.dtype)) + m.shape.to_string()) << "];\n";
    }
    for (int32_t c : n->control_inputs) os << "  n" << c << " -> n" << n->id << " [style=dashed];\n";
  }
  for (size_t i = 0; i < results.size(); ++i)
    os << "  result" << i << " [shape=plaintext, label=" << quoted("output_" + std::to_string(i)) << "];\n  n"
       << results[i].node << " -> result" << i << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace weft
