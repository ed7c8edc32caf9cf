// cond and while_loop: eager, plain C++ control flow; traced, If and While nodes whose subgraphs
// are traced by nested GraphBuilders. Also call_graph, which replays a subgraph through the
// dispatch funnel (the gradients in api/ops/control_flow.cpp are built with it).
#include "api/control_flow.h"

#include <map>
#include <set>
#include <tuple>

#include "api/dispatch.h"
#include "api/graph_builder.h"
#include "api/ops/creation.h"
#include "runtime/graph.h"

namespace weft {

namespace control_flow_detail {

namespace {

std::string describe(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + " " + shape.to_string(); }
std::string describe(const Tensor& t) { return describe(t.dtype(), t.shape()); }

void check_defined(const Tensor& t, const char* op, const std::string& what) {
  if (!t.defined()) throw InvalidArgument(std::string("[") + op + "] " + what + " is an empty Tensor handle");
}

void check_pred(const Tensor& p, const char* op, const std::string& what) {
  check_defined(p, op, what);
  if (p.dtype() != DType::Bool || p.rank() != 0)
    throw InvalidArgument(std::string("[") + op + "] " + what + " must be a bool scalar, got " + describe(p));
}

bool eager_truth(const Tensor& p, const char* op, const std::string& what) {
  check_pred(p, op, what);
  if (p.is_symbolic())
    throw FailedPrecondition(std::string("[") + op + "] " + what + " '" + p.name() +
                             "' is a symbolic tensor outside of its graph");
  return p.item<bool>();
}

bool shapes_compatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

// The checks the While definition makes of a traced body, for the eager loop.
void check_body_results(const std::vector<Tensor>& vars, const std::vector<Tensor>& next) {
  if (next.size() != vars.size())
    throw InvalidArgument("[while_loop] body returns " + std::to_string(next.size()) + " values for " +
                          std::to_string(vars.size()) + " loop variables");
  for (size_t i = 0; i < next.size(); ++i) {
    check_defined(next[i], "while_loop", "the body's result " + std::to_string(i));
    if (next[i].dtype() != vars[i].dtype() || !shapes_compatible(next[i].shape(), vars[i].shape()))
      throw InvalidArgument("[while_loop] loop variable " + std::to_string(i) + " enters the loop as " +
                            describe(vars[i]) + " but the body returns " + describe(next[i]) +
                            "; the body must keep each loop variable's dtype and shape");
  }
}

// One subgraph traced by a builder nested in the one recording now.
struct Traced {
  std::shared_ptr<GraphIR> graph;
  std::vector<GraphBuilder::Capture> captures;
  std::set<const VariableState*> hoisted;
};

using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

Traced trace(GraphBuilder& outer, const std::vector<Tensor>& arg_like, const TraceFn& fn,
             const std::set<const VariableState*>& read_inside, const char* op, const std::string& what,
             const SourceLocation& loc) {
  Traced t{std::make_shared<GraphIR>(), {}, {}};
  GraphBuilder b(t.graph, outer.mode(), &outer);
  b.hoist_variable_reads(read_inside);
  b.set_variable_creation_allowed(false, std::string("variables cannot be created inside ") + op +
                                             "; create them before it and use them inside");
  RecorderScope on(&b);
  std::vector<Tensor> args;
  for (size_t i = 0; i < arg_like.size(); ++i)
    args.push_back(b.placeholder(arg_like[i].dtype(), arg_like[i].shape(), "loop_var_" + std::to_string(i), loc));
  std::vector<Tensor> results = fn(args);
  for (size_t i = 0; i < results.size(); ++i) {
    check_defined(results[i], op, what + "'s result " + std::to_string(i));
    t.graph->results.push_back(b.endpoint_of(results[i], loc));
  }
  t.captures = b.captures();
  t.hoisted = b.hoisted_reads();
  return t;
}

using CaptureKey = std::tuple<const void*, int64_t, int32_t>;
CaptureKey key_of(const Tensor& t) {
  const SymbolicRef* r = t.symbolic_ref();
  return {r->graph.get(), r->node_id, r->output};
}

// Gives the subgraphs one argument list: their first `fixed` args (the loop variables), then the
// union of everything any of them captured; a subgraph gets an unused argument for what only the
// others capture. Returns the outer tensors for the union, in argument order.
std::vector<Tensor> unify_captures(std::initializer_list<Traced*> parts, size_t fixed) {
  std::vector<Tensor> outer;
  std::map<CaptureKey, size_t> position;
  for (Traced* p : parts)
    for (const GraphBuilder::Capture& c : p->captures)
      if (position.emplace(key_of(c.outer), outer.size()).second) outer.push_back(c.outer);
  static const OpDef& placeholder = op_def("Placeholder");
  for (Traced* p : parts) {
    GraphIR& g = *p->graph;
    std::vector<int32_t> args(g.args.begin(), g.args.begin() + static_cast<std::ptrdiff_t>(fixed));
    std::vector<int32_t> mine(outer.size(), -1);
    for (const GraphBuilder::Capture& c : p->captures) mine[position.at(key_of(c.outer))] = c.arg;
    for (size_t i = 0; i < outer.size(); ++i) {
      if (mine[i] < 0) {
        const Tensor& o = outer[i];
        mine[i] = g.add_node(placeholder, {}, {{"dtype", o.dtype()}, {"shape", o.shape()}}, {{o.dtype(), o.shape()}},
                             "capture")
                      .id;
      }
      args.push_back(mine[i]);
    }
    g.args = std::move(args);
  }
  return outer;
}

std::vector<Tensor> traced_cond(GraphBuilder& b, const Tensor& pred, const Branch& then_fn, const Branch& else_fn,
                                const SourceLocation& loc) {
  auto no_args = [](const Branch& f) { return [&f](const std::vector<Tensor>&) { return f(); }; };
  Traced then_g = trace(b, {}, no_args(then_fn), {}, "cond", "the then branch", loc);
  Traced else_g = trace(b, {}, no_args(else_fn), {}, "cond", "the else branch", loc);
  std::vector<Tensor> inputs{pred};
  for (Tensor& t : unify_captures({&then_g, &else_g}, 0)) inputs.push_back(std::move(t));
  static const OpDef& op = op_def("If");
  return dispatch(op, inputs, {{"then_branch", GraphAttr(then_g.graph)}, {"else_branch", GraphAttr(else_g.graph)}},
                  loc);
}

std::vector<Tensor> traced_while(GraphBuilder& b, const LoopCond& cond_fn, const LoopBody& body_fn,
                                 const std::vector<Tensor>& vars, const WhileLoopOptions& options,
                                 const SourceLocation& loc) {
  auto as_list = [&cond_fn](const std::vector<Tensor>& v) { return std::vector<Tensor>{cond_fn(v)}; };
  std::set<const VariableState*> read_inside;
  Traced cond_g, body_g;
  for (int attempt = 0; attempt < 2; ++attempt) {
    cond_g = trace(b, vars, as_list, read_inside, "while_loop", "cond", loc);
    body_g = trace(b, vars, body_fn, read_inside, "while_loop", "the body", loc);
    // A variable the loop writes must be read anew in each iteration, inside the loop: trace
    // again, once, reading those inside (nothing then can differentiate through those reads).
    GraphBuilder::Effects effects = GraphBuilder::effects_of(*cond_g.graph);
    effects.merge(GraphBuilder::effects_of(*body_g.graph));
    std::set<const VariableState*> conflicts;
    for (const auto* hoisted : {&cond_g.hoisted, &body_g.hoisted})
      for (const VariableState* v : *hoisted)
        if (auto it = effects.variables.find(v); it != effects.variables.end() && it->second.written)
          conflicts.insert(v);
    if (conflicts.empty()) break;
    read_inside.insert(conflicts.begin(), conflicts.end());
  }
  std::vector<Tensor> inputs = vars;
  for (Tensor& t : unify_captures({&cond_g, &body_g}, vars.size())) inputs.push_back(std::move(t));
  static const OpDef& op = op_def("While");
  return dispatch(op, inputs,
                  {{"cond", GraphAttr(cond_g.graph)},
                   {"body", GraphAttr(body_g.graph)},
                   {"num_loop_vars", static_cast<int64_t>(vars.size())},
                   {"max_iterations", options.max_iterations}},
                  loc);
}

}  // namespace

std::vector<Tensor> cond(const Tensor& pred, const Branch& then_fn, const Branch& else_fn, const SourceLocation& loc) {
  check_pred(pred, "cond", "pred");
  if (GraphBuilder* b = current_builder()) return traced_cond(*b, pred, then_fn, else_fn, loc);
  std::vector<Tensor> out = eager_truth(pred, "cond", "pred") ? then_fn() : else_fn();
  for (size_t i = 0; i < out.size(); ++i) check_defined(out[i], "cond", "the branch's result " + std::to_string(i));
  return out;
}

std::vector<Tensor> while_loop(const LoopCond& cond_fn, const LoopBody& body_fn, std::vector<Tensor> vars,
                               const WhileLoopOptions& options, const SourceLocation& loc) {
  for (size_t i = 0; i < vars.size(); ++i) check_defined(vars[i], "while_loop", "loop variable " + std::to_string(i));
  if (GraphBuilder* b = current_builder()) return traced_while(*b, cond_fn, body_fn, vars, options, loc);
  int64_t iterations = 0;
  while (options.max_iterations < 0 || iterations < options.max_iterations) {
    if (!eager_truth(cond_fn(vars), "while_loop", "cond's result")) break;
    std::vector<Tensor> next = body_fn(vars);
    check_body_results(vars, next);
    vars = std::move(next);
    ++iterations;
  }
  vars.push_back(constant(iterations));
  return vars;
}

}  // namespace control_flow_detail

namespace {

// The value a variable access node stands for, read now (eager) or in the graph being built.
Tensor replay_read(const GraphIR& g, const Node& n) {
  const std::string& key = n.attrs.get<std::string>("var");
  auto it = g.variables.find(key);
  if (it == g.variables.end()) throw NotFound("[call_graph] the graph has no variable named '" + key + "'");
  if (GraphBuilder* b = current_builder()) return b->read_variable(it->second, false, std::nullopt);
  if (!it->second->value.defined())
    throw FailedPrecondition("[call_graph] variable '" + key + "' is read before it was initialised");
  return it->second->value;
}

std::vector<Tensor> replay_if(const Node& n, std::span<const Tensor> ins, const SourceLocation& loc) {
  const GraphIR& then_g = *n.attrs.get<GraphAttr>("then_branch");
  const GraphIR& else_g = *n.attrs.get<GraphAttr>("else_branch");
  std::span<const Tensor> args = ins.subspan(1);
  return control_flow_detail::cond(
      ins[0], [&] { return call_graph(then_g, args, loc); }, [&] { return call_graph(else_g, args, loc); }, loc);
}

std::vector<Tensor> replay_while(const Node& n, std::span<const Tensor> ins, const SourceLocation& loc) {
  const GraphIR& cond_g = *n.attrs.get<GraphAttr>("cond");
  const GraphIR& body_g = *n.attrs.get<GraphAttr>("body");
  const size_t num_vars = static_cast<size_t>(n.attrs.get<int64_t>("num_loop_vars"));
  std::span<const Tensor> captures = ins.subspan(num_vars);
  auto with_captures = [&](const std::vector<Tensor>& vars) {
    std::vector<Tensor> args = vars;
    args.insert(args.end(), captures.begin(), captures.end());
    return args;
  };
  return control_flow_detail::while_loop(
      [&](const std::vector<Tensor>& v) { return call_graph(cond_g, with_captures(v), loc).at(0); },
      [&](const std::vector<Tensor>& v) { return call_graph(body_g, with_captures(v), loc); },
      {ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(num_vars)},
      {.max_iterations = n.attrs.get_or<int64_t>("max_iterations", -1)}, loc);
}

}  // namespace

std::vector<Tensor> call_graph(const GraphIR& g, std::span<const Tensor> args, const SourceLocation& loc) {
  if (args.size() != g.args.size())
    throw InvalidArgument("[call_graph] the graph takes " + std::to_string(g.args.size()) + " arguments, got " +
                          std::to_string(args.size()));
  std::vector<std::vector<Tensor>> values(static_cast<size_t>(g.id_bound()));
  for (size_t i = 0; i < args.size(); ++i) values[static_cast<size_t>(g.args[i])] = {args[i]};
  std::vector<Tensor> ins;
  for (int32_t id : g.topological_order()) {
    const Node& n = g.node(id);
    std::vector<Tensor>& out = values[static_cast<size_t>(id)];
    const std::string& type = n.type();
    if (type == "Placeholder") {
      if (out.empty()) throw InvalidArgument("[call_graph] placeholder '" + n.name + "' is not an argument of the graph");
      continue;
    }
    ins.clear();
    for (const Endpoint& e : n.inputs) ins.push_back(values[static_cast<size_t>(e.node)].at(static_cast<size_t>(e.index)));
    if (type == "Const") {
      out = {n.attrs.get<Tensor>("value")};
    } else if (n.attrs.find("var")) {
      // Reads (ReadVariableForUpdate included) replay as reads; assignments are left out.
      if (!n.outputs.empty()) out = {replay_read(g, n)};
    } else if (type == "If") {
      out = replay_if(n, ins, loc);
    } else if (type == "While") {
      out = replay_while(n, ins, loc);
    } else if (n.op->has(kSideEffect)) {
      if (n.op->has(kForwardsInput)) out = {ins.at(0)};  // print: the value without the printing
      else if (!n.outputs.empty())
        throw Unimplemented("[call_graph] cannot recompute " + n.describe() + ": it has side effects and outputs");
    } else if (!n.outputs.empty()) {
      out = dispatch(*n.op, ins, n.attrs, loc);
    }
  }
  std::vector<Tensor> results;
  for (const Endpoint& e : g.results) results.push_back(values[static_cast<size_t>(e.node)].at(static_cast<size_t>(e.index)));
  return results;
}

}  // namespace weft
