#include "api/session.h"

#include "scheduler/executor.h"
#include "scheduler/passes/optimize.h"

namespace weft {

Endpoint TensorRef::resolve(const GraphIR& g) const {
  if (!tensor_.defined()) return g.parse_endpoint(name_);
  const SymbolicRef* ref = tensor_.symbolic_ref();
  if (!ref) throw InvalidArgument("[Session] an eager tensor is not a tensor of the graph; fetch or feed graph tensors");
  if (ref->graph.get() != &g)
    throw InvalidArgument("[Session] tensor '" + tensor_.name() + "' belongs to another graph");
  return {static_cast<int32_t>(ref->node_id), ref->output};
}

OperationRef::OperationRef(const Tensor& t) {
  if (!t.defined() || !t.is_symbolic()) throw InvalidArgument("[Session] a target must be a graph operation or tensor");
  name_ = t.symbolic_ref()->node_name;
}

int32_t OperationRef::resolve(const GraphIR& g) const {
  const Node* n = g.find(name_);
  if (!n) g.not_found("operation", name_);
  return n->id;
}

struct Session::Plan {
  std::unique_ptr<Executor> executor;
};

Session::Session(const Graph& graph, SessionOptions options) : graph_(graph), options_(options) {}
Session::~Session() = default;

void Session::initialize_variables() {
  if (initialized_) return;
  const GraphIR& g = graph_.ir();
  // A variable that already has a value (restored from a checkpoint, or assigned eagerly) keeps
  // it: only the others run their initialisers.
  std::vector<int32_t> pending;
  for (int32_t id : g.initializers) {
    auto it = g.variables.find(g.node(id).attrs.get<std::string>("var"));
    if (it == g.variables.end() || !it->second->value.defined()) pending.push_back(id);
  }
  if (!pending.empty()) {
    Executor init(std::make_shared<const GraphIR>(g.clone()), {.targets = pending});
    init.run({});
  }
  initialized_ = true;
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
  ExecutorSpec spec{.feeds = feeds, .fetches = fetches, .targets = targets};
  // The passes may rewrite any node but placeholders (never merged or folded) and side effects:
  // optimise only when every feed is a placeholder, so the fed endpoints survive them.
  bool feeds_are_placeholders = true;
  for (const Endpoint& e : feeds) feeds_are_placeholders &= g.node(e.node).type() == "Placeholder";
  if (options_.optimize && feeds_are_placeholders) {
    copy.results = fetches;
    optimize(copy, {}, targets);
    spec.fetches = copy.results;
    std::erase_if(spec.targets, [&](int32_t t) { return !copy.alive(t); });
  }
  auto plan = std::make_unique<Plan>();
  plan->executor = std::make_unique<Executor>(std::make_shared<const GraphIR>(std::move(copy)), std::move(spec));
  slot = std::move(plan);
  return *slot;
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

  std::lock_guard lock(mu_);
  initialize_variables();
  const Plan& plan = plan_for(feed_points, fetch_points, target_ids);
  return plan.executor->run(feed_values);
}

}  // namespace weft
