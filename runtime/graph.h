// The graph IR: what tracing and GraphScope record, what passes rewrite, what executors run and
// what the graph format stores.
//
//   GraphIR g;
//   Node& x = g.add_node(op_def("Placeholder"), {}, {{"dtype", float32}, {"shape", Shape{-1, 3}}},
//                        {{float32, {-1, 3}}}, "x", loc);
//   Node& y = g.add_node(op_def("Relu"), {{x.id, 0}}, {}, {{float32, {-1, 3}}}, "", loc);
//   y.name;                      // "Relu" (the op's name, made unique: "Relu_1", ...)
//   g.topological_order();       // ids of the live nodes, producers first
//
// Nodes are owned by the graph and addressed by a stable integer id; removing a node leaves a
// hole, so ids held by passes stay valid. A data input is an Endpoint (producer id, output
// index); control inputs are producer ids and only order execution. A graph may also be a
// function body: `args` are its Placeholder nodes in argument order, `results` its outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/source_loc.h"
#include "runtime/variable_state.h"

namespace weft {

struct Endpoint {
  int32_t node = -1;
  int32_t index = 0;
  bool operator==(const Endpoint&) const = default;
  auto operator<=>(const Endpoint&) const = default;
};

struct Node {
  int32_t id = -1;
  std::string name;
  const OpDef* op = nullptr;  // not owned; lives in the op registry
  std::vector<Endpoint> inputs;
  std::vector<int32_t> control_inputs;
  Attrs attrs;
  std::vector<TensorMeta> outputs;  // dtype and (possibly partial) shape of each output
  std::string requested_device;     // what DeviceScope asked for ("" = anywhere)
  std::string assigned_device;      // filled by placement
  SourceLoc loc;

  const std::string& type() const { return op->name; }
  // "node 'MatMul_1' (matmul) created at train.cpp:42": appended to every error about the node.
  std::string describe() const;
};

// The dtype that selects the node's kernel (see OpDef::kernel_dtype_input); float32 for a node
// without inputs or outputs to go by.
DType kernel_dtype(const GraphIR& g, const Node& n);

// Whether running the node changes something outside its outputs: its op has kSideEffect, or it
// is a control-flow node (If, While) one of whose subgraphs holds such a node. Executors make
// these nodes targets and tracing keeps them in program order.
bool has_side_effect(const Node& n);
// Whether any node of `g` has a side effect (see above).
bool has_side_effect(const GraphIR& g);

// What a set of nodes needs to run: needed[id] is 1 for every root and, transitively, for the
// producer of each data input not `fed` and of each control input `follow` accepts (null `fed`:
// nothing is fed; null `follow`: every control input). The one walk behind executor plans,
// pruning and the Session's TF1 run semantics. O(n + e).
std::vector<char> needed_nodes(const GraphIR& g, std::span<const int32_t> roots,
                               const std::function<bool(const Endpoint&)>& fed = nullptr,
                               const std::function<bool(const Node& consumer, int32_t producer)>& follow = nullptr);

class GraphIR {
 public:
  GraphIR() = default;
  // A deep copy: nodes are copied, subgraph attributes and variable states are shared.
  GraphIR clone() const { return *this; }

  // Adds a node named `name` (made unique) or, when empty, after its op ("MatMul", "MatMul_1").
  // The caller has validated inputs and inferred `outputs`.
  Node& add_node(const OpDef& op, std::vector<Endpoint> inputs, Attrs attrs, std::vector<TensorMeta> outputs,
                 std::string_view name, SourceLoc loc = {});
  void add_control_input(int32_t node, int32_t before);
  // Removes a node; the caller has rewired or removed its consumers first. O(nodes): a pass
  // removing many nodes calls remove_nodes once instead.
  void remove_node(int32_t id);
  // Removes every node of `ids` (and the control edges from them) in one walk over the graph,
  // O(nodes + edges) in all; the caller has rewired or removed their data consumers first.
  void remove_nodes(std::span<const int32_t> ids);

  // `base` if no node has it yet, else base_1, base_2, ... (a suffix not given out before).
  std::string unique_name(std::string_view base) const;
  bool alive(int32_t id) const { return id >= 0 && id < id_bound() && nodes_[id] != nullptr; }
  Node& node(int32_t id);
  const Node& node(int32_t id) const;
  const Node* find(std::string_view name) const;
  // One past the largest id ever given out: size arrays indexed by node id with it.
  int32_t id_bound() const { return static_cast<int32_t>(nodes_.size()); }
  int num_nodes() const { return live_; }
  // Live node ids in creation order.
  std::vector<int32_t> node_ids() const;
  // Live node ids, every producer (data or control) before its consumers; InvalidArgument
  // naming a node on the cycle if there is one.
  std::vector<int32_t> topological_order() const;
  // consumers()[id]: the (consumer, input slot) pairs reading each output of node id.
  struct Use {
    int32_t node;
    int32_t slot;
  };
  std::vector<std::vector<Use>> consumers() const;
  // Points every data input (and arg/result) reading `from` at `to`. O(nodes): a pass replacing
  // many values calls the overload below once instead.
  void replace_uses(Endpoint from, Endpoint to);
  // Each (from, to) pair as above, in one walk over the graph: O(nodes + edges) plus a lookup per
  // input reading a replaced node. Not transitive: an input reading a `from` gets its `to` even if
  // that is itself a `from` of another pair.
  void replace_uses(std::span<const std::pair<Endpoint, Endpoint>> replacements);
  const TensorMeta& meta(Endpoint e) const { return node(e.node).outputs.at(static_cast<size_t>(e.index)); }
  std::string endpoint_name(Endpoint e) const;  // "MatMul_1:0"
  // Parses "name:index" (or "name", meaning index 0); NotFound with close names if absent.
  Endpoint parse_endpoint(std::string_view tensor_name) const;
  // NotFound "no node named 'x'; did you mean 'y', 'z'?".
  [[noreturn]] void not_found(std::string_view what, std::string_view name) const;

  // Graphviz DOT text; nodes are grouped into one cluster per assigned (or requested) device.
  std::string to_dot() const;

  // Function bodies: the argument placeholders and the results.
  std::vector<int32_t> args;
  std::vector<Endpoint> results;
  // Variables the graph reads or writes, by the name its ReadVariable/Assign nodes use.
  std::map<std::string, std::shared_ptr<VariableState>, std::less<>> variables;
  // Initialisers of variables created inside a TF1-style graph: run once by the Session.
  std::vector<int32_t> initializers;

 private:
  // Null where a node was removed. Copying the graph copies the nodes (see the copy constructor).
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, int32_t, std::less<>> by_name_;
  // Per base name that needed a suffix: where the next search for a free one starts.
  std::map<std::string, int32_t, std::less<>> next_suffix_;
  int live_ = 0;

  std::string unique_name(std::string_view base, int32_t& suffix) const;

 public:
  GraphIR(const GraphIR& o);
  GraphIR& operator=(const GraphIR& o);
  GraphIR(GraphIR&&) noexcept = default;
  GraphIR& operator=(GraphIR&&) noexcept = default;
};

}  // namespace weft
