#include "api/session.h"

#include <algorithm>

#include <iostream>

#include "api/dispatch.h"
#include "cluster/cluster.h"
#include "cluster/cluster_runtime.h"
#include "scheduler/stall_watchdog.h"
#include "cluster/cluster_placement.h"
#include "comm/step_collectives.h"
#include "scheduler/graph_compiler.h"

namespace weft {

Endpoint TensorRef::resolve(const GraphIR& g) const {
  if (!tensor_.defined()) return g.parse_endpoint(name_);
  const SymbolicRef* ref = tensor_.symbolic_ref();
  if (!ref) throw InvalidArgument("[Session] an eager tensor is not a tensor of the graph; fetch or feed graph tensors");
  if (ref->graph.get() != &g)
    throw InvalidArgument("[Session] tensor '" + tensor_.name() + "' belongs to another graph");
  return {static_cast<int32_t>(ref->node_id), ref->output};
}

OperationRef::OperationRef(const Operation& op) {
  if (!op.defined())
    throw InvalidArgument("[Session] this target ran eagerly (it was made outside a GraphScope): there is no graph "
                          "operation to run");
  graph_ = op.graph_ptr();
  id_ = op.id();
  name_ = op.name();
}

OperationRef::OperationRef(const Tensor& t) {
  if (!t.defined() || !t.is_symbolic()) throw InvalidArgument("[Session] a target must be a graph operation or tensor");
  const SymbolicRef* ref = t.symbolic_ref();
  graph_ = ref->graph;
  id_ = static_cast<int32_t>(ref->node_id);
  name_ = ref->node_name;
}

int32_t OperationRef::resolve(const GraphIR& g) const {
  if (graph_) {
    if (graph_.get() != static_cast<const void*>(&g))
      throw InvalidArgument("[Session] target '" + name_ + "' belongs to another graph");
    if (!g.alive(id_)) throw InvalidArgument("[Session] target '" + name_ + "' is no longer in the graph");
    return id_;
  }
  const Node* n = g.find(name_);
  if (!n) g.not_found("operation", name_);
  return n->id;
}

namespace {

bool holds_subgraphs(const Node& n) {
  for (const auto& [k, v] : n.attrs)
    if (const GraphAttr* sub = std::get_if<GraphAttr>(&v); sub && *sub) return true;
  return false;
}

// The control inputs the graph builder adds to keep program order (a read after an assignment,
// an assignment after the reads before it, print after print): each runs after a node with a
// side effect, and is a variable read, a side effect or a control-flow node itself. They order
// two nodes when both run; they do not make the earlier one run. Any other control input (a
// train op's group, the value an assignment returns) is a dependency the user asked for.
bool orders_only(const GraphIR& g, const Node& consumer, int32_t producer) {
  if (!has_side_effect(g.node(producer))) return false;
  return consumer.type() == "ReadVariable" || has_side_effect(consumer) || holds_subgraphs(consumer);
}

// Drops the ordering-only control inputs whose producer this run does not otherwise need, so
// that, as in TensorFlow 1, fetching a value never runs an assignment it does not depend on.
void drop_idle_orderings(GraphIR& g, const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                         const std::vector<int32_t>& targets) {
  auto fed = [&](const Endpoint& e) { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); };
  std::vector<int32_t> roots = targets;
  for (const Endpoint& e : fetches)
    if (!fed(e)) roots.push_back(e.node);
  const std::vector<char> needed =
      needed_nodes(g, roots, fed, [&](const Node& n, int32_t c) { return !orders_only(g, n, c); });
  for (int32_t id : g.node_ids()) {
    Node& n = g.node(id);
    std::erase_if(n.control_inputs,
                  [&](int32_t c) { return !needed[static_cast<size_t>(c)] && orders_only(g, n, c); });
  }
}

}  // namespace

struct Session::Plan {
  std::unique_ptr<CompiledGraph> compiled;
  bool has_collectives = false;  // a failed step may leave its groups interrupted
};

Session::Session(const Graph& graph, SessionOptions options) : graph_(graph), options_(options) {}

Session::Session(const Graph& graph, const Cluster& cluster, SessionOptions options)
    : graph_(graph), options_(options) {
  if (ExecutionTarget target = execution_target(cluster); target.spans_tasks())
    cluster_ = std::make_unique<ExecutionTarget>(std::move(target));
}
Session::~Session() {
  plans_.clear();  // the plans' graphs on the tasks are released before the session ends there
}

void Session::initialize_variables() {
  const GraphIR& g = graph_.ir();
  if (initialized_ == g.initializers.size() && (!cluster_ || variables_seen_ == g.variables.size())) return;
  // A variable that already has a value (restored from a checkpoint, or assigned eagerly) keeps
  // it: only the others run their initialisers. Variables added to the graph after a run (an
  // optimizer's slots, made when its train op is built) are initialised on the next run.
  std::vector<int32_t> pending;
  for (size_t i = initialized_; i < g.initializers.size(); ++i) {
    const int32_t id = g.initializers[i];
    auto it = g.variables.find(g.node(id).attrs.get<std::string>("var"));
    if (it == g.variables.end() || !it->second->value.defined()) pending.push_back(id);
  }
  GraphIR copy = g.clone();
  // In a cluster a variable lives on its task, which has only what the chief ships. A variable
  // whose value the chief holds (made from a concrete tensor, restored from a checkpoint,
  // assigned eagerly) has no initializer to run there: the first run assigns it the chief's
  // value, which stays on the chief's host and travels as a tensor (Send/Recv), not inside the
  // registered partitions.
  std::vector<std::string> sent;
  if (cluster_) {
    static const OpDef& const_op = op_def("Const");
    static const OpDef& assign_op = op_def("AssignVariable");
    const std::string& host = cluster_->host_device();
    for (const auto& [key, state] : g.variables) {
      if (!state->value.defined() || sent_values_.contains(key)) continue;
      Node& value = copy.add_node(const_op, {}, {{"value", state->value}}, {{state->dtype, state->shape}},
                                  key + "/ChiefValue");
      value.requested_device = host;
      Node& assign = copy.add_node(assign_op, {{value.id, 0}}, {{"var", key}, {"dtype", state->dtype}, {"shape", state->shape}},
                                   {}, key + "/AssignChiefValue");
      assign.requested_device = state->device;
      pending.push_back(assign.id);
      sent.push_back(key);
    }
  }
  if (!pending.empty()) {
    drop_idle_orderings(copy, {}, {}, pending);
    CompiledGraph init(std::move(copy), {.targets = pending}, compile_options());
    init.run({});
  }
  initialized_ = g.initializers.size();
  sent_values_.insert(sent.begin(), sent.end());
  variables_seen_ = g.variables.size();
}

int64_t default_stall_warning_ms() { return default_stall_warning().count(); }
int64_t default_stall_timeout_ms() { return default_stall_timeout().count(); }

CompileOptions Session::compile_options() const {
  CompileOptions o{.optimize = options_.optimize,
                   .log_device_placement = options_.log_device_placement,
                   .allow_soft_placement = options_.allow_soft_placement,
                   .name = "Session",
                   .collectives = &process_step_collectives()};
  // Watched by the chief in a cluster, by the process's stall watchdog alone (scheduler/stall_watchdog.h).
  o.stall_warning = std::chrono::milliseconds(options_.stall_warning_ms);
  o.stall_timeout = std::chrono::milliseconds(options_.stall_timeout_ms);
  if (cluster_) {
    cluster_->apply(o);
    o.step_timeout = std::chrono::milliseconds(options_.operation_timeout_ms);
  }
  return o;
}

const Session::Plan& Session::plan_for(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                                       const std::vector<int32_t>& targets) {
  const GraphIR& g = graph_.ir();
  // Nodes added to the graph after a run make new plans: the key includes the graph's size.
  std::string key = std::to_string(g.id_bound()) + "|";
  for (const Endpoint& e : feeds) key += std::to_string(e.node) + ":" + std::to_string(e.index) + ",";
  key += "|";
  for (const Endpoint& e : fetches) key += std::to_string(e.node) + ":" + std::to_string(e.index) + ",";
  key += "|";
  for (int32_t t : targets) key += std::to_string(t) + ",";
  auto& slot = plans_[key];
  if (slot) return *slot;

  GraphIR copy = g.clone();
  drop_idle_orderings(copy, feeds, fetches, targets);
  auto plan = std::make_unique<Plan>();
  plan->compiled = std::make_unique<CompiledGraph>(
      std::move(copy), CompileSpec{.feeds = feeds, .fetches = fetches, .targets = targets}, compile_options());
  for (auto& [node, device] : plan->compiled->placement()) placement_[node] = device;
  // (The whole graph's: a collective the plan pruned costs only a reset it did not need.)
  for (int32_t id : g.node_ids()) plan->has_collectives |= g.node(id).type().starts_with("Collective");
  slot = std::move(plan);
  return *slot;
}

std::map<std::string, std::string> Session::placement() const {
  std::lock_guard lock(mu_);
  return placement_;
}

std::vector<Tensor> Session::run(const std::vector<std::pair<TensorRef, Tensor>>& feeds,
                                 const std::vector<TensorRef>& fetches, const std::vector<OperationRef>& targets) {
  const GraphIR& g = graph_.ir();
  std::vector<Endpoint> feed_points;
  std::vector<Tensor> feed_values;
  for (const auto& [ref, value] : feeds) {
    Endpoint e = ref.resolve(g);
    for (const Endpoint& seen : feed_points)
      if (seen == e) throw InvalidArgument("[Session] '" + g.endpoint_name(e) + "' is fed twice");
    feed_points.push_back(e);
    feed_values.push_back(value);
  }
  std::vector<Endpoint> fetch_points;
  for (const TensorRef& ref : fetches) fetch_points.push_back(ref.resolve(g));
  std::vector<int32_t> target_ids;
  for (const OperationRef& ref : targets) target_ids.push_back(ref.resolve(g));
  if (fetch_points.empty() && target_ids.empty())
    throw InvalidArgument("[Session] run() needs at least one fetch or target");

  const Plan* plan = nullptr;
  {
    // Planning is serialised; runs are not: plans live as long as the session and are shared.
    std::lock_guard lock(mu_);
    if (reset_collectives_) {
      // A step with collectives failed: MPI cannot cancel what it had issued, so every task's
      // collectives are reset (bounded) before the next step, as DataParallel does.
      cluster_->reset_collectives();
      reset_collectives_ = false;
    }
    initialize_variables();
    plan = &plan_for(feed_points, fetch_points, target_ids);
  }
  try {
    return plan->compiled->run(feed_values);
  } catch (...) {
    if (cluster_ && plan->has_collectives) {
      std::lock_guard lock(mu_);
      reset_collectives_ = true;
    }
    throw;
  }
}

}  // namespace weft
