// weft-inspect: what a saved model or graph file holds, without running it.
//
//   weft-inspect model_dir          # nodes, ops by type, inputs, outputs, variables and their size
//   weft-inspect model_dir --nodes  # also every node: op, inputs, attributes, output specs
//   weft-inspect graph.capnp --dot  # Graphviz DOT text: weft-inspect g.capnp --dot | dot -Tsvg
//   weft-inspect weft_flight_worker_step12_pid9_0.json   # a flight record (cluster/flight_record.h):
//                                   # every task's transfers and collectives, merged by time, and
//                                   # what each task still waited for
//
// The summary lists the nodes of windowed and normalising ops (convolutions, pooling, batch
// norm) with their attributes, since those attributes (strides, padding, dilations, epsilon) are
// what a reader of a CNN's graph wants to check.
//
// Any failure is one line on stderr, "weft-inspect: error: ...", and a non-zero exit status.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/function_core.h"
#include "api/graph.h"
#include "cluster/flight_record.h"
#include "runtime/attr_text.h"
#include "runtime/error.h"
#include "tools/tool_support.h"

namespace weft::tools {
namespace {

struct Options {
  std::string path;
  bool dot = false;
  bool nodes = false;
};

// "Conv2D(x, conv2d/kernel) strides=[1, 1] padding="SAME" -> float32(-1, 28, 28, 32)"
std::string node_line(const GraphIR& g, const Node& n) {
  std::string line = n.type() + "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) line += (i ? ", " : "") + g.endpoint_name(n.inputs[i]);
  line += ")";
  for (const auto& [name, value] : n.attrs) line += " " + name + "=" + attr_text(value);
  for (size_t i = 0; i < n.outputs.size(); ++i) line += (i ? ", " : " -> ") + TensorSpec{n.outputs[i].dtype, n.outputs[i].shape}.to_string();
  return line;
}

bool is_windowed_or_normalising(const std::string& type) {
  static const char* kTypes[] = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "FusedConv2D",
                                 "DepthwiseConv2dNative", "MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad",
                                 "FusedBatchNorm", "FusedBatchNormGrad", "LayerNorm", "LayerNormGrad"};
  return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes);
}

void print_nodes(const GraphIR& g, bool all) {
  std::vector<std::string> lines;
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    if (all || is_windowed_or_normalising(n.type())) lines.push_back("  " + n.name + " = " + node_line(g, n));
  }
  if (lines.empty()) return;
  std::cout << (all ? "nodes (" : "convolutions, pooling and normalisation (") << lines.size() << "):\n";
  for (const std::string& line : lines) std::cout << line << "\n";
}

std::string spec(const TensorMeta& m) { return TensorSpec{m.dtype, m.shape}.to_string(); }

// "401408 bytes (392.0 KiB)": exact for scripts, rounded for people.
std::string bytes_text(uint64_t n) {
  std::string s = std::to_string(n) + (n == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  if (unit >= 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f %s)", v, units[unit]);
    s += buf;
  }
  return s;
}

void print_summary(const std::string& path, const GraphIR& g) {
  std::cout << path << ": " << g.num_nodes() << (g.num_nodes() == 1 ? " node" : " nodes") << "\n";

  std::map<std::string, int> counts;
  for (int32_t id : g.node_ids()) ++counts[g.node(id).type()];
  std::vector<std::pair<std::string, int>> ops(counts.begin(), counts.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  size_t width = 0;
  for (const auto& [type, n] : ops) width = std::max(width, type.size());
  std::cout << "ops (" << ops.size() << " types):\n";
  for (const auto& [type, n] : ops) std::cout << "  " << type << std::string(width - type.size() + 2, ' ') << n << "\n";

  // Only named: inspecting a graph never opens the files its nodes name.
  const std::vector<std::string> touching = file_system_nodes(g);
  if (!touching.empty()) {
    std::cout << "nodes that read or write files (" << touching.size() << "):\n";
    for (const std::string& t : touching) std::cout << "  " << t << "\n";
  }

  std::vector<const Node*> inputs;
  for (int32_t id : g.node_ids())
    if (g.node(id).type() == "Placeholder") inputs.push_back(&g.node(id));
  std::cout << "inputs (" << inputs.size() << "):\n";
  for (const Node* n : inputs) std::cout << "  " << n->name << ": " << spec(n->outputs.at(0)) << "\n";

  const std::vector<std::string> outputs = output_names(g);
  std::cout << "outputs (" << outputs.size() << "):\n";
  for (const std::string& name : outputs) std::cout << "  " << name << ": " << spec(g.meta(g.parse_endpoint(name))) << "\n";

  uint64_t total = 0;
  std::vector<std::string> lines;
  for (const auto& [name, state] : g.variables) {
    const int64_t elements = state->shape.num_elements();
    std::string line = "  " + name + ": " + TensorSpec{state->dtype, state->shape}.to_string();
    if (elements >= 0) {
      const uint64_t bytes = static_cast<uint64_t>(elements) * dtype_size(state->dtype);
      total += bytes;
      line += ", " + bytes_text(bytes);
    }
    if (!state->value.defined()) line += ", no value saved";
    lines.push_back(std::move(line));
  }
  std::cout << "variables (" << lines.size() << ", " << bytes_text(total) << "):\n";
  for (const std::string& line : lines) std::cout << line << "\n";
}

// A flight record is a JSON file: one whose opening names the marker, or any ".json" file that
// is a JSON object (so a damaged record is reported as one, not as a bad graph file).
bool is_flight_record_file(const std::string& path, std::string* text) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char head[256] = {};
  in.read(head, sizeof head);
  const std::string_view opening(head, static_cast<size_t>(in.gcount()));
  const size_t first = opening.find_first_not_of(" \t\r\n");
  const bool json_object = first != std::string_view::npos && opening[first] == '{';
  const bool named_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!looks_like_flight_record(opening) && !(json_object && named_json)) return false;
  constexpr uintmax_t kMaxBytes = uintmax_t{1} << 30;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument("[flight record] cannot read the size of " + path + ": " + ec.message());
  if (size > kMaxBytes) throw InvalidArgument("[flight record] " + path + " is larger than 1 GiB");
  text->resize(static_cast<size_t>(size));
  in.clear();
  in.seekg(0);
  in.read(text->data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size) throw InvalidArgument("[flight record] cannot read " + path);
  return true;
}

void inspect(const Options& o) {
  if (std::string text; is_flight_record_file(o.path, &text)) {
    try {
      std::cout << format_flight_record(flight_record_from_json(text));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(o.path + ": " + e.what());
    }
    return;
  }
  Graph graph = Graph::load(o.path);
  if (o.dot) std::cout << graph.to_dot();
  else {
    print_summary(o.path, graph.ir());
    print_nodes(graph.ir(), o.nodes);
  }
}

}  // namespace
}  // namespace weft::tools

int main(int argc, char** argv) {
  weft::tools::Options o;
  CLI::App app("Summarises a saved weft model or graph file (ops, inputs, outputs, variables), or prints a flight record.",
               "weft-inspect");
  app.add_option("path", o.path, "a saved-model directory (Function::save), a graph file, or a flight record (.json)")
      ->required();
  app.add_flag("--dot", o.dot, "print the graph as Graphviz DOT text instead of the summary");
  app.add_flag("--nodes", o.nodes, "after the summary, every node with its inputs, attributes and outputs");
  return weft::tools::run_tool(app, argc, argv, [&] { weft::tools::inspect(o); });
}
