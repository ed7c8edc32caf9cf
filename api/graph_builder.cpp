#include "api/graph_builder.h"

#include <algorithm>

#include "api/dispatch.h"
#include "runtime/tensor_internals.h"
#include "scheduler/executor.h"

namespace weft {

GraphBuilder* current_builder() { return dynamic_cast<GraphBuilder*>(eager_context().recorder); }

GraphBuilder::GraphBuilder(std::shared_ptr<GraphIR> graph, Mode mode, GraphBuilder* parent)
    : graph_(std::move(graph)), mode_(mode), parent_(parent) {}

SourceLoc GraphBuilder::loc_of(const std::source_location& where) const {
  const std::source_location& at = eager_context().caller_location ? *eager_context().caller_location : where;
  return {at.file_name(), at.function_name(), at.line()};
}

std::string GraphBuilder::scoped_name(std::string_view base) const {
  std::string name;
  for (const std::string& scope : eager_context().name_scopes) name += scope + "/";
  return name + std::string(base);
}

Node& GraphBuilder::add(const OpDef& op, std::vector<Endpoint> inputs, Attrs attrs, std::vector<TensorMeta> outputs,
                        std::string_view name, const std::source_location& where) {
  Node& n = graph_->add_node(op, std::move(inputs), std::move(attrs), std::move(outputs),
                             scoped_name(name.empty() ? std::string_view(op.name) : name), loc_of(where));
  for (const Endpoint& e : n.inputs)
    if (auto it = readers_of_read_.find(e.node); it != readers_of_read_.end()) it->second.push_back(n.id);
  const auto& devices = eager_context().device_stack;
  if (!devices.empty()) n.requested_device = devices.back();
  return n;
}

Tensor GraphBuilder::symbolic(Endpoint e) const {
  const Node& n = graph_->node(e.node);
  auto ref = std::make_unique<SymbolicRef>();
  ref->graph = graph_;
  ref->node_id = e.node;
  ref->output = e.index;
  ref->node_name = n.name;
  const TensorMeta& m = n.outputs.at(static_cast<size_t>(e.index));
  return Tensor::symbolic(m.dtype, m.shape, std::move(ref));
}

Endpoint GraphBuilder::endpoint_of(const Tensor& t, const std::source_location& where) {
  if (!t.is_symbolic()) {
    // An eager tensor read by the graph: captured as a constant, once per tensor.
    auto it = constants_.find(tensor_impl(t));
    if (it != constants_.end()) return {it->second.second, 0};
    static const OpDef& const_op = op_def("Const");
    Node& n = add(const_op, {}, {{"value", t}}, {{t.dtype(), t.shape()}}, "Const", where);
    constants_.emplace(tensor_impl(t), std::make_pair(t, n.id));
    return {n.id, 0};
  }
  const SymbolicRef* ref = t.symbolic_ref();
  if (ref->graph.get() == graph_.get()) {
    if (!graph_->alive(static_cast<int32_t>(ref->node_id)))
      throw FailedPrecondition("[graph] tensor '" + t.name() + "' belongs to a node that no longer exists");
    return {static_cast<int32_t>(ref->node_id), ref->output};
  }
  // A tensor of an enclosing graph: becomes an argument of this one (once).
  for (GraphBuilder* outer = parent_; outer; outer = outer->parent_) {
    if (ref->graph.get() != outer->graph_.get()) continue;
    auto key = std::make_pair(ref->graph.get(), std::make_pair(ref->node_id, ref->output));
    if (auto it = captured_args_.find(key); it != captured_args_.end()) return {it->second, 0};
    Endpoint in_parent = parent_->endpoint_of(t, where);
    // The caller's own handle where it belongs to the parent: tapes know tensors by handle, and
    // the If/While node taking it as an input must be recognised as reading it.
    Tensor outer_tensor = ref->graph.get() == parent_->graph_.get() ? t : parent_->symbolic(in_parent);
    Tensor arg = placeholder(t.dtype(), t.shape(), "capture", where);
    int32_t id = static_cast<int32_t>(arg.symbolic_ref()->node_id);
    captures_.push_back({outer_tensor, id});
    captured_args_.emplace(key, id);
    return {id, 0};
  }
  throw FailedPrecondition("[graph] tensor '" + t.name() +
                           "' belongs to another graph; a graph can only use its own tensors, eager tensors, "
                           "and tensors of the graphs it is nested in");
}

std::vector<Tensor> GraphBuilder::record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                         const InferContext& inferred, const std::source_location& where) {
  std::vector<Endpoint> ins;
  ins.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    ins.push_back(endpoint_of(t, where));
    // A variable converted to a Tensor implicitly is read where no source location can reach;
    // its read takes the line of the op that reads it.
    Node& producer = graph_->node(ins.back().node);
    if (!producer.loc.known()) producer.loc = loc_of(where);
  }
  // identity(x, name) asks for a node name through the "_name" attribute; it is not an attribute
  // of the op itself.
  std::string name;
  Attrs kept;
  for (const auto& [k, v] : attrs) {
    if (k == "_name") name = std::get<std::string>(v);
    else kept.set(k, v);
  }
  std::vector<TensorMeta> outs;
  for (int i = 0; i < inferred.num_outputs(); ++i) outs.push_back(inferred.output(i));
  Node& n = add(op, std::move(ins), std::move(kept), std::move(outs), name, where);
  if (op.has(kSideEffect)) {
    order_side_effect(n);
  } else {
    // A control-flow node: ordered by what its subgraphs do.
    Effects effects;
    bool has_subgraphs = false;
    for (const auto& [k, v] : n.attrs)
      if (const GraphAttr* g = std::get_if<GraphAttr>(&v); g && *g) {
        effects.merge(effects_of(**g));
        has_subgraphs = true;
      }
    if (has_subgraphs) order_control_flow(n, effects);
  }
  std::vector<Tensor> result;
  result.reserve(n.outputs.size());
  for (size_t i = 0; i < n.outputs.size(); ++i) result.push_back(symbolic({n.id, static_cast<int32_t>(i)}));
  return result;
}

void GraphBuilder::rethrow_with_context(const OpDef& op, const Attrs& attrs, const std::source_location& where) {
  std::string name = op.name;
  if (const AttrValue* v = attrs.find("_name"); v && std::holds_alternative<std::string>(*v))
    name = std::get<std::string>(*v);
  name = graph_->unique_name(scoped_name(name));
  const std::string context = " [node '" + name + "' (" + op.display + ") created at " + loc_of(where).to_string() + "]";
  try {
    throw;
  } catch (const Error& e) {
    throw_error(e.code(), e.what() + context);
  }
}

void GraphBuilder::order_side_effect(Node& n) {
  // An optimizer op writing a variable in place reads it through ReadVariableForUpdate: it is
  // that variable's latest write. Other side effects (print) keep their program order.
  bool writes_variable = false;
  for (const Endpoint& e : n.inputs) {
    const Node& producer = graph_->node(e.node);
    if (producer.type() != "ReadVariableForUpdate") continue;
    const std::string& key = producer.attrs.get<std::string>("var");
    for (auto& [state, k] : variable_keys_) {
      if (k != key) continue;
      VariableAccess& acc = accesses_[state];
      acc.last_write = n.id;
      acc.reads_since_write.clear();
    }
    writes_variable = true;
  }
  if (!writes_variable && !n.op->has(kUnorderedSideEffect)) {
    if (last_side_effect_ >= 0) graph_->add_control_input(n.id, last_side_effect_);
    last_side_effect_ = n.id;
  }
  side_effects_.push_back(n.id);
}

void GraphBuilder::Effects::merge(const Effects& o) {
  for (const auto& [state, e] : o.variables) {
    VariableEffect& mine = variables[state];
    mine.var = e.var;
    mine.written |= e.written;
  }
  other_side_effects |= o.other_side_effects;
}

GraphBuilder::Effects GraphBuilder::effects_of(const GraphIR& g) {
  Effects fx;
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    if (const AttrValue* key = n.attrs.find("var"); key && std::holds_alternative<std::string>(*key)) {
      // Variable access nodes name their variable; those with a side effect write it.
      auto it = g.variables.find(std::get<std::string>(*key));
      if (it != g.variables.end()) {
        VariableEffect& e = fx.variables[it->second.get()];
        e.var = it->second;
        e.written |= n.op->has(kSideEffect);
      }
    } else if (n.op->has(kSideEffect)) {
      fx.other_side_effects = true;
    }
    for (const auto& [k, v] : n.attrs)
      if (const GraphAttr* sub = std::get_if<GraphAttr>(&v); sub && *sub) fx.merge(effects_of(**sub));
  }
  return fx;
}

void GraphBuilder::order_control_flow(Node& n, const Effects& effects) {
  // Like a read of every variable its subgraphs read and a write of every one they write, so the
  // node sees the writes before it and the accesses after it see its writes.
  bool side_effect = effects.other_side_effects;
  for (const auto& [state, e] : effects.variables) {
    variable_key(e.var);  // the graph lists every variable it touches, nested ones included
    VariableAccess& acc = accesses_[state];
    if (acc.last_write >= 0) graph_->add_control_input(n.id, acc.last_write);
    if (e.written) {
      for (int32_t r : acc.reads_since_write) graph_->add_control_input(n.id, r);
      acc.reads_since_write.clear();
      acc.last_write = n.id;
      side_effect = true;
    } else {
      acc.reads_since_write.push_back(n.id);
    }
  }
  if (effects.other_side_effects) {
    if (last_side_effect_ >= 0) graph_->add_control_input(n.id, last_side_effect_);
    last_side_effect_ = n.id;
  }
  if (side_effect) side_effects_.push_back(n.id);
}

void GraphBuilder::hoist_variable_reads(std::set<const VariableState*> except) {
  hoist_reads_ = parent_ != nullptr;
  hoist_except_ = std::move(except);
}

std::string GraphBuilder::variable_key(const std::shared_ptr<VariableState>& var) {
  auto it = variable_keys_.find(var.get());
  if (it != variable_keys_.end()) return it->second;
  std::string key = var->name.empty() ? "Variable" : var->name;
  for (int i = 1;; ++i) {
    auto existing = graph_->variables.find(key);
    if (existing == graph_->variables.end() || existing->second == var) break;
    key = var->name + "_" + std::to_string(i);
  }
  graph_->variables[key] = var;
  variable_keys_.emplace(var.get(), key);
  return key;
}

Tensor GraphBuilder::placeholder(DType dtype, const Shape& shape, const std::string& name,
                                 const std::source_location& where) {
  static const OpDef& op = op_def("Placeholder");
  Node& n = add(op, {}, {{"dtype", dtype}, {"shape", shape}}, {{dtype, shape}}, name, where);
  graph_->args.push_back(n.id);
  return symbolic({n.id, 0});
}

Tensor GraphBuilder::read_variable(const std::shared_ptr<VariableState>& var, bool for_update,
                                   const std::optional<std::source_location>& where) {
  static const OpDef& read = op_def("ReadVariable");
  static const OpDef& read_for_update = op_def("ReadVariableForUpdate");
  if (hoist_reads_ && !for_update && !hoist_except_.contains(var.get())) {
    // Reading before the If/While node is the same as reading at the start of its subgraph as
    // long as this subgraph has not written the variable yet.
    auto it = accesses_.find(var.get());
    if (it == accesses_.end() || it->second.last_write < 0) {
      hoisted_.insert(var.get());
      return parent_->read_variable(var, false, where);
    }
  }
  const std::string key = variable_key(var);
  Node& n = add(for_update ? read_for_update : read, {}, {{"var", key}, {"dtype", var->dtype}, {"shape", var->shape}},
                {{var->dtype, var->shape}}, for_update ? "ReadVariableForUpdate" : "ReadVariable",
                where.value_or(std::source_location()));
  if (!where) n.loc = {};
  VariableAccess& acc = accesses_[var.get()];
  if (acc.last_write >= 0) graph_->add_control_input(n.id, acc.last_write);
  if (for_update) {
    // Copy-on-write happens here: it must wait for the reads before it, like a write. It waits
    // for their readers too: a value still held when it runs would cost a copy of the variable
    // every step (a training step's optimizer reads would otherwise run at its start, while the
    // forward pass still holds the weights). A reader added later still gets its copy.
    for (int32_t r : acc.reads_since_write) {
      graph_->add_control_input(n.id, r);
      if (auto it = readers_of_read_.find(r); it != readers_of_read_.end()) {
        for (int32_t reader : it->second) graph_->add_control_input(n.id, reader);
        readers_of_read_.erase(it);
      }
    }
    acc.reads_since_write.clear();
    acc.last_write = n.id;
    side_effects_.push_back(n.id);
  } else {
    acc.reads_since_write.push_back(n.id);
    readers_of_read_.emplace(n.id, std::vector<int32_t>());
  }
  return symbolic({n.id, 0});
}

int32_t GraphBuilder::assign_variable(const std::shared_ptr<VariableState>& var, const Tensor& value, const char* kind,
                                      const std::source_location& where) {
  const OpDef& op = op_def(kind);
  const std::string key = variable_key(var);
  Attrs attrs{{"var", key}, {"dtype", var->dtype}, {"shape", var->shape}};
  std::array<Tensor, 1> ins{value};
  InferContext ic(op, ins, attrs);
  try {
    op.infer(ic);
  } catch (const Error&) {
    rethrow_with_context(op, attrs, where);
  }
  Node& n = add(op, {endpoint_of(value, where)}, std::move(attrs), {}, "", where);
  VariableAccess& acc = accesses_[var.get()];
  if (acc.last_write >= 0) graph_->add_control_input(n.id, acc.last_write);
  for (int32_t r : acc.reads_since_write) graph_->add_control_input(n.id, r);
  acc.reads_since_write.clear();
  acc.last_write = n.id;
  side_effects_.push_back(n.id);
  return n.id;
}

int32_t GraphBuilder::group(const std::vector<int32_t>& deps, std::string_view name,
                            const std::source_location& where) {
  static const OpDef& op = op_def("NoOp");
  Node& n = add(op, {}, {}, {}, name, where);
  for (int32_t d : deps) graph_->add_control_input(n.id, d);
  return n.id;
}

void GraphBuilder::set_variable_creation_allowed(bool allowed, std::string why_not) {
  variable_creation_allowed_ = allowed;
  variable_creation_refusal_ = std::move(why_not);
}

Tensor GraphBuilder::lift(const Tensor& initial, const std::string& var_name) {
  // As TensorFlow's init_scope: the initial value is computed now, outside the function, from
  // the ops recorded so far (a Keras layer built lazily inside a traced call draws its weights
  // here). It must not depend on the function's arguments.
  auto snapshot = std::make_shared<const GraphIR>(graph_->clone());
  const SymbolicRef* ref = initial.symbolic_ref();
  Endpoint e{static_cast<int32_t>(ref->node_id), ref->output};
  try {
    RecorderScope eager(nullptr);
    Executor exec(snapshot, {.fetches = {e}});
    return exec.run({})[0];
  } catch (const InvalidArgument& err) {
    throw InvalidArgument("[Variable] the initial value of variable '" + var_name +
                          "' depends on the traced function's arguments; compute it from concrete values (" +
                          err.what() + ")");
  }
}

void GraphBuilder::on_variable_created(const std::shared_ptr<VariableState>& var, const Tensor& initial,
                                       const std::source_location& where) {
  if (!variable_creation_allowed_) throw FailedPrecondition("[Variable] '" + var->name + "': " + variable_creation_refusal_);
  if (!initial.is_symbolic()) return;  // the constructor has copied it
  if (mode_ == Mode::kFunction) {
    if (initial.symbolic_ref()->graph.get() != graph_.get())
      throw InvalidArgument("[Variable] the initial value of '" + var->name + "' belongs to another graph");
    Tensor value = lift(initial, var->name);
    Tensor copy = Tensor::empty(value.dtype(), value.shape(), value.device_ptr());
    if (value.nbytes()) value.device_ptr()->copy_on_device(raw_data(value), raw_data(copy), value.nbytes());
    var->value = copy;
    return;
  }
  // TF1 graph: the Session's first run assigns the initial value.
  static const OpDef& assign = op_def("AssignVariable");
  const std::string key = variable_key(var);
  Node& n = add(assign, {endpoint_of(initial, where)}, {{"var", key}, {"dtype", var->dtype}, {"shape", var->shape}}, {},
                key + "/Assign", where);
  graph_->initializers.push_back(n.id);
}

}  // namespace weft
