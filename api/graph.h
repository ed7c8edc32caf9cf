// Graph and GraphScope: TF1-style graphs built by running ordinary op calls inside a scope.
//
//   Graph g;
//   {
//     GraphScope scope(g);                            // like `with g.as_default():`
//     NameScope layer("dense1");                      // node names become "dense1/..."
//     Tensor x = placeholder(float32, {-1, 784}, "x");
//     Tensor y = identity(matmul(x, w), "y");
//   }
//   g.tensor("y:0"); g.operation("y"); g.operations();  // NotFound (with suggestions) if absent
//   std::cout << g.to_dot();
//   g.save("graph.capnp");                 // the graph alone; variables declared, without values
//   Graph h = Graph::load("graph.capnp");  // or a directory written by Function::save
//
// Graph is a handle: copies share the same graph. Run one with a Session (api/session.h).
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/source_loc.h"
#include "runtime/tensor.h"

namespace weft {

class Attrs;
class GraphBuilder;
class GraphIR;
class OpRecorder;
struct Node;

// A node of a Graph, seen from the api. A default-constructed Operation stands for work that has
// already run eagerly (what Optimizer::apply_gradients returns outside a graph): it has no node,
// and asking for its name or any other property is a FailedPrecondition.
class Operation {
 public:
  Operation() = default;
  Operation(std::shared_ptr<GraphIR> graph, int32_t id) : graph_(std::move(graph)), id_(id) {}
  // Whether this is a node of a graph.
  bool defined() const { return graph_ != nullptr; }
  const std::string& name() const;
  const std::string& type() const;  // "MatMul"
  // The assigned device, else the requested one, else "".
  std::string device() const;
  std::vector<Tensor> inputs() const;
  std::vector<Tensor> outputs() const;
  std::vector<Operation> control_inputs() const;
  const SourceLoc& source_location() const;
  const Attrs& attrs() const;  // runtime/attr.h
  const Node& node() const;
  int32_t id() const { return id_; }
  const std::shared_ptr<GraphIR>& graph_ptr() const { return graph_; }

 private:
  std::shared_ptr<GraphIR> graph_;
  int32_t id_ = -1;
};

class Graph {
 public:
  Graph();
  // Wraps an existing graph (a traced function's, a loaded one).
  explicit Graph(std::shared_ptr<GraphIR> ir);

  Tensor tensor(std::string_view name) const;  // "y:0", or "y" for its first output
  Operation operation(std::string_view name) const;
  std::vector<Operation> operations() const;  // in creation order
  int num_nodes() const;
  std::string to_dot() const;

  // Writes the graph file (runtime/graph_format.h), atomically. Variables are declared (name,
  // dtype, shape) but their values are not written: use a Checkpoint, or Function::save.
  void save(const std::string& path) const;
  // A graph file, or a saved-model directory (api/saved_model.h): its graph, with the saved
  // variable values set. Files are untrusted: see runtime/graph_format.h for what is checked.
  static Graph load(const std::string& path);

  GraphIR& ir() const { return *ir_; }  // runtime/graph.h
  const std::shared_ptr<GraphIR>& ir_ptr() const { return ir_; }
  // The builder GraphScope installs; one per graph, so captured constants and the order of
  // variable accesses carry over from one scope to the next.
  GraphBuilder& builder() const;
  bool same_as(const Graph& o) const { return ir_ == o.ir_; }

 private:
  std::shared_ptr<GraphIR> ir_;
  std::shared_ptr<GraphBuilder> builder_;
};

// Records the ops called on this thread into `g` while alive. Scopes nest.
class GraphScope {
 public:
  explicit GraphScope(Graph& g);
  ~GraphScope();
  GraphScope(const GraphScope&) = delete;
  GraphScope& operator=(const GraphScope&) = delete;

 private:
  Graph graph_;
  OpRecorder* saved_;  // not owned
};

// Prefixes the names of nodes created inside it ("dense1/MatMul"); nests. No effect eagerly.
class NameScope {
 public:
  explicit NameScope(std::string name);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;
};

// An argument of the graph being built: fed by Session::run. Unknown dims are -1.
// FailedPrecondition outside a GraphScope or traced function.
Tensor placeholder(DType dtype, const Shape& shape, const std::string& name = "Placeholder",
                   const std::source_location& loc = std::source_location::current());

}  // namespace weft
