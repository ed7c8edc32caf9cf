#include "api/function_gradient.h"

#include <algorithm>
#include <set>

#include "api/context.h"
#include "api/control_flow.h"
#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/gradient_tape.h"
#include "api/graph_builder.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/variable.h"
#include "comm/step_collectives.h"
#include "scheduler/graph_compiler.h"
#include "scheduler/passes/optimize.h"

namespace weft {

namespace {

// The forward graph, which also tells the gradient function whose call a tape entry records:
// the entry's "f" attribute points at it and shares ownership of the TapedFunction, so a tape
// outliving the weft::function still has everything its gradient needs.
struct OwnedGraph final : GraphIR {
  const TapedFunction* owner = nullptr;
};

std::vector<Tensor> partitioned_call_grad(const GradContext& ctx) {
  const GraphIR& f = *ctx.attrs.get<GraphAttr>("f");
  return static_cast<const OwnedGraph&>(f).owner->backward(ctx);
}

[[noreturn]] void infer_partitioned_call(InferContext& ctx) {
  ctx.fail("is recorded on tapes by weft::function and cannot be dispatched");
}

// The op a call is recorded as: never a node of a graph (a call inside a trace is inlined), only
// a tape entry, so it has no kernel. Registered on first use with its gradient.
const OpDef& partitioned_call_op() {
  static const OpDef& op = []() -> const OpDef& {
    op_def("Const");  // the built-in ops first, so this one does not shadow a later registration
    const OpDef& def = op_registry().add({.name = "PartitionedCall",
                                          .display = "function",
                                          .min_inputs = 0,
                                          .max_inputs = -1,
                                          .num_outputs = -1,
                                          .attrs = {{"f", AttrType::Graph}},
                                          .infer = infer_partitioned_call,
                                          .flags = kStateful});
    register_gradient("PartitionedCall", partitioned_call_grad);
    return def;
  }();
  return op;
}

Node& add_placeholder(GraphIR& g, DType dtype, const Shape& shape, const std::string& name) {
  static const OpDef& op = op_def("Placeholder");
  return g.add_node(op, {}, {{"dtype", dtype}, {"shape", shape}}, {{dtype, shape}}, name);
}

bool all_ones(const Tensor& t) {
  if (t.dtype() == DType::Float32) {
    for (float v : t.to_vector<float>())
      if (v != 1.f) return false;
    return true;
  }
  if (t.dtype() == DType::Float64) {
    for (double v : t.to_vector<double>())
      if (v != 1.0) return false;
    return true;
  }
  return false;
}

// The gradient of sum(y * dy) reaches y as ones * dy (the seed of the tape, broadcast and folded
// into a constant): a multiply per result, over the whole result, that the backward can skip.
void drop_multiplications_by_one(GraphIR& g) {
  for (int32_t id : g.topological_order()) {
    const Node& n = g.node(id);
    if (n.type() != "Mul" || n.inputs.size() != 2) continue;
    for (size_t k = 0; k < 2; ++k) {
      const Node& c = g.node(n.inputs[k].node);
      const Endpoint other = n.inputs[1 - k];
      const TensorMeta& m = g.meta(other);
      if (c.type() != "Const" || m.dtype != n.outputs[0].dtype || m.shape != n.outputs[0].shape ||
          !all_ones(c.attrs.get<Tensor>("value")))
        continue;
      g.replace_uses({id, 0}, other);
      break;
    }
  }
}

}  // namespace

TapedFunction::~TapedFunction() = default;

TapedFunction::Made TapedFunction::make(const GraphIR& raw, bool optimize) {
  for (const auto& [state, effect] : GraphBuilder::effects_of(raw).variables)
    if (effect.written) return {Kind::kEager, nullptr};
  bool floating_result = false, floating_input = false;
  for (const Endpoint& r : raw.results) floating_result |= is_floating(raw.meta(r).dtype);
  for (int32_t a : raw.args) floating_input |= is_floating(raw.meta({a, 0}).dtype);
  for (int32_t id : raw.node_ids()) {
    const Node& n = raw.node(id);
    floating_input |= n.type() == "ReadVariable" && is_floating(n.outputs.at(0).dtype);
  }
  if (!floating_result || !floating_input) return {Kind::kNotNeeded, nullptr};
  auto f = std::make_shared<TapedFunction>(Private{});
  try {
    f->build(raw, optimize);
  } catch (const Error&) {
    // An op without a gradient, or a gradient that cannot be traced: eager execution lets the
    // tape meet it (or not, if no gradient reaches it) exactly as without a function.
    return {Kind::kEager, nullptr};
  }
  return {Kind::kOneOp, std::move(f)};
}

void TapedFunction::build(const GraphIR& raw, bool optimize) {
  register_builtin_gradients();
  optimize_ = optimize;
  const auto loc = std::source_location::current();
  auto g = std::make_shared<GraphIR>(raw.clone());
  const int32_t num_forward = g->id_bound();  // nodes below this id are the forward trace's
  num_args_ = raw.args.size();
  num_results_ = raw.results.size();

  // Each variable is one input however many nodes read it (nothing writes it).
  std::map<const VariableState*, size_t> variable_input;
  std::vector<std::pair<int32_t, size_t>> reads;  // ReadVariable node, input index
  for (int32_t id : g->node_ids()) {
    const Node& n = g->node(id);
    if (n.type() != "ReadVariable") continue;
    const std::shared_ptr<VariableState>& state = g->variables.at(n.attrs.get<std::string>("var"));
    auto [it, fresh] = variable_input.emplace(state.get(), num_args_ + variables_.size());
    if (fresh) variables_.push_back(state);
    reads.emplace_back(id, it->second);
  }
  const size_t num_inputs = num_args_ + variables_.size();

  std::vector<Endpoint> gradient(num_inputs);  // in g
  std::vector<int32_t> output_grad_args;
  {
    ObserversHidden hidden;  // the tapes around the call must not see the gradient trace
    GraphBuilder builder(g, GraphBuilder::Mode::kFunction);
    builder.set_variable_creation_allowed(false, "a gradient creates a variable");
    RecorderScope recording(&builder);
    // One handle per endpoint: the tape knows tensors by handle.
    const std::vector<int32_t> order = g->topological_order();
    std::vector<std::vector<Tensor>> handle(static_cast<size_t>(num_forward));
    for (int32_t id : order)
      for (size_t k = 0; k < g->node(id).outputs.size(); ++k)
        handle[static_cast<size_t>(id)].push_back(builder.symbolic({id, static_cast<int32_t>(k)}));

    GradientTape tape;
    std::vector<Tensor> sources;
    std::vector<size_t> source_input;
    auto add_source = [&](const Tensor& t, size_t input) {
      if (!is_floating(t.dtype())) return;
      tape.watch(t);
      sources.push_back(t);
      source_input.push_back(input);
    };
    for (size_t i = 0; i < num_args_; ++i) add_source(handle[static_cast<size_t>(raw.args[i])].at(0), i);
    for (const auto& [id, input] : reads) add_source(handle[static_cast<size_t>(id)].at(0), input);
    // The trace, as the tape would have recorded it had the body run eagerly.
    std::vector<Tensor> ins;
    for (int32_t id : order) {
      const Node& n = g->node(id);
      if (n.inputs.empty()) continue;
      ins.clear();
      for (const Endpoint& e : n.inputs) ins.push_back(handle[static_cast<size_t>(e.node)].at(static_cast<size_t>(e.index)));
      tape.on_op(*n.op, ins, handle[static_cast<size_t>(id)], n.attrs);
    }
    // The vector-Jacobian product as the gradient of sum_i sum(y_i * dy_i): what the tape
    // differentiates is a scalar. The extra multiply is pruned from the backward graph unless a
    // gradient function needs it; the dy_i reach the results through its gradient.
    Tensor target;
    for (size_t i = 0; i < num_results_; ++i) {
      const Endpoint r = raw.results[i];
      const Tensor& y = handle[static_cast<size_t>(r.node)].at(static_cast<size_t>(r.index));
      result_has_grad_.push_back(is_floating(y.dtype()));
      if (!result_has_grad_.back()) continue;
      Tensor dy = builder.placeholder(y.dtype(), y.shape(), "output_grad_" + std::to_string(i), loc);
      output_grad_args.push_back(static_cast<int32_t>(dy.symbolic_ref()->node_id));
      Tensor term = reduce_sum(mul(y, dy));
      target = target.defined() ? add(target, term) : term;
    }
    std::vector<Tensor> grads = tape.gradient(target, sources);
    std::vector<Tensor> per_input(num_inputs);
    for (size_t k = 0; k < grads.size(); ++k) {
      Tensor& sum = per_input[source_input[k]];
      sum = sum.defined() ? add(sum, grads[k]) : grads[k];
    }
    for (size_t i = 0; i < num_inputs; ++i)
      gradient[i] = per_input[i].defined() ? builder.endpoint_of(per_input[i], loc) : Endpoint{-1, 0};
  }

  // The forward values the backward nodes read: the inputs, or hidden results of the forward.
  std::set<Endpoint> saved;
  for (int32_t id : g->node_ids()) {
    if (id < num_forward) continue;
    for (const Endpoint& e : g->node(id).inputs)
      if (e.node < num_forward) saved.insert(e);
  }
  for (const Endpoint& e : gradient)
    if (e.node >= 0 && e.node < num_forward) saved.insert(e);
  std::map<int32_t, size_t> input_of;  // forward node -> input it stands for
  for (size_t i = 0; i < num_args_; ++i) input_of[raw.args[i]] = i;
  for (const auto& [id, input] : reads) input_of[id] = input;
  std::vector<Endpoint> hidden;
  for (const Endpoint& e : saved)
    if (!input_of.contains(e.node)) hidden.push_back(e);

  // Forward: the trace's own nodes (prints included), returning the hidden values too.
  auto forward = std::make_shared<OwnedGraph>();
  static_cast<GraphIR&>(*forward) = raw.clone();
  forward->owner = this;
  forward->results.insert(forward->results.end(), hidden.begin(), hidden.end());
  if (optimize) {
    std::vector<int32_t> targets;
    for (int32_t id : forward->node_ids())
      if (has_side_effect(forward->node(id))) targets.push_back(id);
    weft::optimize(*forward, {}, targets, optimize_options_for(local_placement_devices()));
  }
  forward_ = forward;
  forward_executor_ = compile_function(forward_->clone(),
                                       {.optimize = false, .name = "forward", .collectives = &process_step_collectives()});

  // Backward: the rest, with placeholders where it read forward values.
  GraphIR& bw = *g;
  std::vector<int32_t> args;
  for (size_t i = 0; i < num_inputs; ++i) {
    const TensorMeta m = i < num_args_ ? raw.meta({raw.args[i], 0})
                                       : TensorMeta{variables_[i - num_args_]->dtype, variables_[i - num_args_]->shape};
    args.push_back(add_placeholder(bw, m.dtype, m.shape, "input_" + std::to_string(i)).id);
  }
  for (size_t j = 0; j < hidden.size(); ++j) {
    const TensorMeta m = raw.meta(hidden[j]);
    args.push_back(add_placeholder(bw, m.dtype, m.shape, "saved_" + std::to_string(j)).id);
  }
  auto stand_in = [&](const Endpoint& e) -> Endpoint {
    if (auto it = input_of.find(e.node); it != input_of.end()) return {args[it->second], 0};
    return {args[num_inputs + static_cast<size_t>(std::find(hidden.begin(), hidden.end(), e) - hidden.begin())], 0};
  };
  for (const Endpoint& e : saved) bw.replace_uses(e, stand_in(e));
  for (Endpoint& e : gradient)
    if (e.node >= 0 && e.node < num_forward) e = stand_in(e);
  std::vector<int32_t> order = bw.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (*it < num_forward) bw.remove_node(*it);
  args.insert(args.end(), output_grad_args.begin(), output_grad_args.end());
  bw.args = std::move(args);
  bw.results.clear();
  gradient_of_ = std::move(gradient);
  backward_ = std::move(g);
}

const TapedFunction::Variant& TapedFunction::variant(const std::vector<bool>& wanted) const {
  std::lock_guard lock(mu_);
  std::unique_ptr<Variant>& slot = variants_[wanted];
  if (slot) return *slot;
  auto v = std::make_unique<Variant>();
  GraphIR g = backward_->clone();
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!wanted[i]) continue;
    g.results.push_back(gradient_of_[i]);
    v->inputs.push_back(i);
  }
  weft::optimize(g, {}, {}, {.constant_folding = false, .cse = false, .fusion = false});  // prunes
  v->replay = std::make_shared<const GraphIR>(g);
  if (optimize_) {
    weft::optimize(g, {}, {}, {.constant_folding = true, .cse = false, .fusion = false});
    drop_multiplications_by_one(g);
    weft::optimize(g, {}, {}, optimize_options_for(local_placement_devices()));
  }
  v->executor =
      compile_function(std::move(g), {.optimize = false, .name = "backward", .collectives = &process_step_collectives()});
  slot = std::move(v);
  return *slot;
}

std::vector<Tensor> TapedFunction::call(std::span<const Tensor> args) const {
  std::vector<Tensor> inputs(args.begin(), args.end());
  inputs.reserve(args.size() + variables_.size() + forward_->results.size() - num_results_);
  // Read through Variable so that the recording tapes watch the trainable ones, as in eager.
  for (const std::shared_ptr<VariableState>& state : variables_) inputs.push_back(Variable(state).value());
  std::vector<Tensor> outs = forward_executor_->run_checked_feeds(args);
  for (size_t i = num_results_; i < outs.size(); ++i) inputs.push_back(std::move(outs[i]));
  outs.resize(num_results_);
  static const OpDef& op = partitioned_call_op();
  const Attrs attrs{{"f", GraphAttr(shared_from_this(), forward_.get())}};
  const std::vector<OpObserver*> observers = eager_context().observers;
  for (OpObserver* o : observers) o->on_op(op, inputs, outs, attrs);
  return outs;
}

std::vector<Tensor> TapedFunction::backward(const GradContext& ctx) const {
  const size_t num_inputs = num_args_ + variables_.size();
  std::vector<bool> wanted(num_inputs);
  bool any = false;
  for (size_t i = 0; i < num_inputs; ++i) {
    wanted[i] = gradient_of_[i].node >= 0 && ctx.needs(static_cast<int>(i));
    any |= wanted[i];
  }
  std::vector<Tensor> result(ctx.inputs.size());
  if (!any) return result;
  const Variant& v = variant(wanted);
  std::vector<Tensor> feeds(ctx.inputs.begin(), ctx.inputs.end());  // inputs, then hidden values
  for (size_t i = 0; i < num_results_; ++i)
    if (result_has_grad_[i]) feeds.push_back(ctx.grad(static_cast<int>(i)));
  // A tape recording now (around this one's gradient) must see the backward ops, as in eager.
  std::vector<Tensor> grads =
      eager_context().observers.empty() ? v.executor->run(feeds) : call_graph(*v.replay, feeds);
  for (size_t k = 0; k < v.inputs.size(); ++k) result[v.inputs[k]] = std::move(grads[k]);
  return result;
}

}  // namespace weft
