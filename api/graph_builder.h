// GraphBuilder: the recorder installed while a function is traced or a GraphScope is open. Every
// op that goes through the dispatch funnel becomes a node; eager tensors the ops read become
// Const nodes (captured once each); Variables become ReadVariable/Assign nodes, ordered per
// variable in program order; print and other side effects keep their program order too.
//
//   auto g = std::make_shared<GraphIR>();
//   GraphBuilder b(g, GraphBuilder::Mode::kFunction);
//   RecorderScope on(&b);               // dispatch now records into g
//   Tensor x = b.placeholder(float32, {-1, 3}, "x", loc);
//   Tensor y = relu(x);                 // a node of g; y is symbolic
//
// Builders nest (the branches of cond, the body of while_loop): a tensor of an enclosing graph
// used inside a nested one is captured as an extra argument of the nested graph. A node holding
// subgraphs (If, While) is ordered in its graph like the variable accesses and side effects its
// subgraphs contain.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/context.h"
#include "runtime/graph.h"

namespace weft {

class GraphBuilder final : public OpRecorder {
 public:
  enum class Mode {
    kFunction,  // weft::function: variables created here are lifted out and initialised now
    kGraph,     // GraphScope: variables created here are initialised by the Session's first run
  };
  GraphBuilder(std::shared_ptr<GraphIR> graph, Mode mode, GraphBuilder* parent = nullptr);

  std::vector<Tensor> record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                             const InferContext& inferred, const std::source_location& where) override;
  [[noreturn]] void rethrow_with_context(const OpDef& op, const Attrs& attrs, const std::source_location& where) override;

  // A new argument of the graph (appended to graph().args).
  Tensor placeholder(DType dtype, const Shape& shape, const std::string& name, const std::source_location& where);
  // Without a location the read takes that of the first op that reads it.
  Tensor read_variable(const std::shared_ptr<VariableState>& var, bool for_update,
                       const std::optional<std::source_location>& where);
  // kind: "AssignVariable", "AssignAddVariable" or "AssignSubVariable". Returns the node's id.
  int32_t assign_variable(const std::shared_ptr<VariableState>& var, const Tensor& value, const char* kind,
                          const std::source_location& where);
  // A NoOp named `name` that waits for every node of `deps`: running it runs them (a train op).
  int32_t group(const std::vector<int32_t>& deps, std::string_view name, const std::source_location& where);
  // Called by the Variable constructor while this builder records; `initial` may be symbolic.
  void on_variable_created(const std::shared_ptr<VariableState>& var, const Tensor& initial,
                           const std::source_location& where);
  void set_variable_creation_allowed(bool allowed, std::string why_not = "");

  // The endpoint a tensor stands for in this graph: its node output, a captured constant, or an
  // argument capturing a tensor of an enclosing graph.
  Endpoint endpoint_of(const Tensor& t, const std::source_location& where);
  // A symbolic tensor handle for a node output of this graph.
  Tensor symbolic(Endpoint e) const;

  GraphIR& graph() { return *graph_; }
  std::shared_ptr<GraphIR> graph_ptr() const { return graph_; }
  Mode mode() const { return mode_; }
  // Whether this builds a subgraph (a branch of cond, a loop body) of another builder's graph.
  bool nested() const { return parent_ != nullptr; }
  // Nodes with side effects, in program order: targets of the function.
  const std::vector<int32_t>& side_effects() const { return side_effects_; }
  // Tensors of enclosing graphs captured by this one, each with the argument standing for it.
  struct Capture {
    Tensor outer;
    int32_t arg;
  };
  const std::vector<Capture>& captures() const { return captures_; }

  // For nested builders: a read of a variable this graph has not written yet is made in the
  // enclosing graph instead and captured, so it becomes an input of the If/While node and a tape
  // can differentiate through it to the variable. Variables in `except` are read here all the
  // same (a loop that writes a variable must read each iteration's value).
  void hoist_variable_reads(std::set<const VariableState*> except = {});
  // The variables whose reads went to the enclosing graph.
  const std::set<const VariableState*>& hoisted_reads() const { return hoisted_; }

  // The variables a graph and the subgraphs of its nodes read and write, and whether it has
  // other side effects (print).
  struct VariableEffect {
    std::shared_ptr<VariableState> var;
    bool written = false;
  };
  struct Effects {
    std::map<const VariableState*, VariableEffect> variables;
    bool other_side_effects = false;
    void merge(const Effects& o);
  };
  static Effects effects_of(const GraphIR& g);

 private:
  struct VariableAccess {
    int32_t last_write = -1;
    std::vector<int32_t> reads_since_write;
  };
  // The nodes that take each ReadVariable node's value so far: a ReadVariableForUpdate waits for
  // them (read_variable), so that by the time it runs no earlier read's value is still held and
  // the update writes the variable's buffer in place instead of copying it first.
  std::unordered_map<int32_t, std::vector<int32_t>> readers_of_read_;
  std::string variable_key(const std::shared_ptr<VariableState>& var);
  std::string scoped_name(std::string_view base) const;
  SourceLoc loc_of(const std::source_location& where) const;
  Node& add(const OpDef& op, std::vector<Endpoint> inputs, Attrs attrs, std::vector<TensorMeta> outputs,
            std::string_view name, const std::source_location& where);
  void order_side_effect(Node& n);
  void order_control_flow(Node& n, const Effects& effects);
  Tensor lift(const Tensor& initial, const std::string& var_name);

  std::shared_ptr<GraphIR> graph_;
  Mode mode_;
  GraphBuilder* parent_;  // not owned
  std::map<const TensorImpl*, std::pair<Tensor, int32_t>> constants_;  // captured eager tensor -> Const node
  std::map<const VariableState*, std::string> variable_keys_;
  std::map<const VariableState*, VariableAccess> accesses_;
  std::vector<int32_t> side_effects_;
  int32_t last_side_effect_ = -1;  // print and friends, chained in program order
  std::vector<Capture> captures_;
  std::map<std::pair<const void*, std::pair<int64_t, int32_t>>, int32_t> captured_args_;
  bool hoist_reads_ = false;
  std::set<const VariableState*> hoist_except_;
  std::set<const VariableState*> hoisted_;
  bool variable_creation_allowed_ = true;
  std::string variable_creation_refusal_;
};

// Installs a recorder (or none: nullptr) on this thread for the scope's lifetime.
class RecorderScope {
 public:
  explicit RecorderScope(OpRecorder* recorder) : saved_(eager_context().recorder) {
    eager_context().recorder = recorder;
  }
  ~RecorderScope() { eager_context().recorder = saved_; }
  RecorderScope(const RecorderScope&) = delete;
  RecorderScope& operator=(const RecorderScope&) = delete;

 private:
  OpRecorder* saved_;
};

// The builder recording on this thread, or null.
GraphBuilder* current_builder();

}  // namespace weft
