#include "scheduler/graph_compiler.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>

#include "runtime/local_rendezvous.h"
#include "scheduler/step_rendezvous.h"
#include "runtime/cancellation.h"
#include "runtime/device.h"
#include "runtime/rendezvous.h"
#include "scheduler/passes/optimize.h"
#include "scheduler/passes/partition.h"
#include "scheduler/passes/random_streams.h"
#include "scheduler/stall_watchdog.h"
#include "scheduler/step_message_edges.h"

namespace weft {

namespace {

// Step ids of this process's partitioned runs: unique, so that the keys of concurrent runs of
// any graphs never meet in the shared rendezvous.
int64_t next_step_id() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Step 1: every feed becomes an argument placeholder.
std::vector<int32_t> feeds_to_args(GraphIR& g, const std::vector<Endpoint>& feeds) {
  std::vector<int32_t> args;
  std::vector<std::pair<Endpoint, Endpoint>> replaced;
  for (const Endpoint& e : feeds) {
    const Node& producer = g.node(e.node);
    if (producer.type() == "Placeholder") {
      args.push_back(e.node);
      continue;
    }
    const TensorMeta m = g.meta(e);
    Node& p = g.add_node(op_registry().get("Placeholder"), {}, {{"dtype", m.dtype}, {"shape", m.shape}}, {m},
                         producer.name + "/fed_" + std::to_string(e.index), producer.loc);
    p.requested_device = producer.requested_device;
    args.push_back(p.id);
    replaced.push_back({e, {p.id, 0}});
  }
  if (!replaced.empty()) g.replace_uses(replaced);
  return args;
}

// Step 2: removes what neither a fetch nor a target needs (the args stay: they are run()'s
// parameters).
void keep_needed(GraphIR& g, const std::vector<int32_t>& targets) {
  std::vector<int32_t> roots = targets;
  for (const Endpoint& e : g.results) roots.push_back(e.node);
  for (int32_t a : g.args) roots.push_back(a);
  const std::vector<char> needed = needed_nodes(g, roots);
  std::vector<int32_t> unneeded;
  for (int32_t id : g.node_ids())
    if (!needed[static_cast<size_t>(id)]) unneeded.push_back(id);
  if (!unneeded.empty()) g.remove_nodes(unneeded);
}

// A variable lives in one place whichever plan is compiled (the initialiser's, the training
// step's): where it was created (a DeviceScope around its creation), else where the first node
// naming it (in creation order) asks, else, in a cluster, on the host. Every node naming it goes
// there, as TensorFlow runs a resource's ops on the resource's device: a later request (an
// assignment made under another DeviceScope) cannot split it. Run before pruning, on the whole
// graph, for that reason.
void pin_variables(GraphIR& g, const std::string& host, const std::vector<PlacementDevice>& devices) {
  std::map<std::string, std::string, std::less<>> home;
  std::set<std::string, std::less<>> created_somewhere;
  for (const auto& [name, state] : g.variables)
    if (state && !state->device.empty()) {
      home[name] = state->device;
      created_somewhere.insert(name);
    }
  const std::vector<int32_t> ids = g.node_ids();
  for (int32_t id : ids) {
    const Node& n = g.node(id);
    const AttrValue* var = n.attrs.find("var");
    if (!var || !std::holds_alternative<std::string>(*var)) continue;
    std::string& where = home[std::get<std::string>(*var)];
    if (where.empty()) where = n.requested_device;
  }
  // A home that names no device (a task the cluster does not have) would be soft-placed anew by
  // each plan's cost model; the host (or, alone, placement's own choice) keeps it in one place.
  for (auto& [name, where] : home) {
    if (where.empty()) continue;
    const DeviceSpec want = DeviceSpec::parse(where);
    bool exists = false;
    for (const PlacementDevice& d : devices) exists |= want.matches(DeviceSpec::parse(d.name));
    if (!exists) where = host;
  }
  for (int32_t id : ids) {
    Node& n = g.node(id);
    const AttrValue* var = n.attrs.find("var");
    if (!var || !std::holds_alternative<std::string>(*var)) continue;
    const std::string& name = std::get<std::string>(*var);
    if (!n.requested_device.empty() && !created_somewhere.contains(name)) continue;
    const std::string& where = home[name];
    n.requested_device = where.empty() ? host : where;
  }
}

}  // namespace

std::unique_ptr<Executor> partition_executor(std::shared_ptr<const GraphIR> partition) {
  ExecutorSpec es;
  for (int32_t a : partition->args) es.feeds.push_back({a, 0});
  es.fetches = partition->results;
  // Every node but the placeholders (fed, not run; one left unfed is found through its readers).
  for (int32_t id : partition->node_ids())
    if (partition->node(id).type() != "Placeholder") es.targets.push_back(id);
  return std::make_unique<Executor>(std::move(partition), std::move(es));
}

PlacementDevice placement_device(const DeviceInfo& d) {
  PlacementDevice p{.name = d.name, .type = d.type == "GPU" ? DeviceType::CUDA : DeviceType::CPU};
  if (p.type == DeviceType::CPU) {
    // A logical CPU has its share of the cores; AVX2 cores do ~50 GFLOP/s each on GEMM.
    p.flops_per_second = 5e10 * std::max(1, d.cores);
    p.bytes_per_second = 1e10 * std::max(1, d.cores);
    p.op_overhead_seconds = 1e-6;
  } else {
    p.flops_per_second = 5e13;
    p.bytes_per_second = 2e12;
    p.op_overhead_seconds = 5e-6;
  }
  return p;
}

OptimizeOptions optimize_options_for(const std::vector<PlacementDevice>& devices) {
  OptimizeOptions o;
  o.cpu_only_fusions =
      std::none_of(devices.begin(), devices.end(), [](const PlacementDevice& d) { return d.type != DeviceType::CPU; });
  return o;
}

std::vector<PlacementDevice> local_placement_devices() {
  std::vector<PlacementDevice> out;
  for (const DeviceInfo& d : local_device_infos()) out.push_back(placement_device(d));
  return out;
}

CompiledGraph::CompiledGraph(GraphIR g, CompileSpec spec, CompileOptions options) {
  for (const Endpoint& e : spec.feeds) {
    feed_names_.push_back(g.endpoint_name(e));  // throws for an endpoint that does not exist
    feed_metas_.push_back(g.meta(e));
  }
  for (const Endpoint& e : spec.fetches) (void)g.meta(e);
  for (int32_t t : spec.targets)
    if (!g.alive(t)) throw InvalidArgument("[" + options.name + "] target node id " + std::to_string(t) + " is not in the graph");

  if (options.devices.empty()) options.devices = local_placement_devices();
  pin_variables(g, options.remote ? options.host_device : std::string(), options.devices);
  g.args = feeds_to_args(g, spec.feeds);
  g.results = spec.fetches;
  std::vector<int32_t> targets = spec.targets;
  keep_needed(g, targets);
  // Here, on the process that owns the graph and before it is placed anywhere: an unseeded random
  // node draws the same numbers on whichever task it lands (runtime/random_seed.h). After
  // pruning, so only nodes that run take seeds from the sequence.
  give_random_streams(g);
  if (options.optimize) {
    optimize(g, {}, targets, optimize_options_for(options.devices));
    std::erase_if(targets, [&](int32_t t) { return !g.alive(t); });
  }

  remote_ = options.remote;
  step_limits_ = {options.step_timeout, options.stall_warning, options.stall_timeout};
  name_ = options.name;
  collectives_ = options.collectives;
  const std::string& host = options.host_device;
  // In a cluster the caller's tensors live on the host: feeds start there.
  if (remote_ && !host.empty())
    for (int32_t a : g.args) g.node(a).requested_device = host;
  const std::vector<PlacementDevice> devices = std::move(options.devices);
  const PlacementResult placed = place(g, devices, {.allow_soft_placement = options.allow_soft_placement});
  for (const std::string& notice : placed.notices) std::cerr << "weft: " << notice << "\n";
  // ... and fetches end there: a value made on another task is sent to the host by an Identity.
  if (remote_ && !host.empty()) {
    std::map<Endpoint, Endpoint> moved;
    for (Endpoint& e : g.results) {
      const Node& producer = g.node(e.node);
      if (producer.assigned_device == host) continue;
      auto [it, fresh] = moved.try_emplace(e);
      if (fresh) {
        const TensorMeta m = g.meta(e);
        Node& id = g.add_node(op_registry().get("Identity"), {e}, {}, {m}, producer.name + "/to_host", producer.loc);
        id.assigned_device = host;
        it->second = {id.id, 0};
      }
      e = it->second;
    }
  }
  if (options.log_device_placement) std::cerr << placement_summary(g);

  graph_ = std::make_shared<GraphIR>(std::move(g));
  const GraphIR& global = *graph_;
  const std::vector<int32_t> ids = global.node_ids();
  const std::string device = ids.empty() ? std::string() : global.node(ids.front()).assigned_device;
  bool one_device = true;
  for (int32_t id : ids) one_device &= global.node(id).assigned_device == device;
  if (one_device && (!remote_ || device.empty() || remote_->is_local(device))) {
    ExecutorSpec es;
    for (int32_t a : global.args) es.feeds.push_back({a, 0});
    es.fetches = global.results;
    es.targets = targets;
    parts_.push_back({device, std::make_unique<Executor>(std::shared_ptr<const GraphIR>(graph_), std::move(es))});
    return;
  }

  PartitionResult p = partition(global, {.incarnation = process_incarnation()});
  StepMessageEdges step_edges;
  if (remote_) {
    step_edges = step_message_edges(p, [&](std::string_view d) { return remote_->is_local(d); });
    feed_sends_ = std::move(step_edges.feed_sends);
  }
  // Partition index -> index in parts_ (local ones), or -1 (another task's).
  std::vector<int> local_index(p.partitions.size(), -1);
  std::vector<Partition> remote_parts;
  for (size_t i = 0; i < p.partitions.size(); ++i) {
    Partition& part = p.partitions[i];
    if (remote_ && !remote_->is_local(part.device)) {
      remote_parts.push_back(std::move(part));
      continue;
    }
    local_index[i] = static_cast<int>(parts_.size());
    auto pg = std::make_shared<const GraphIR>(std::move(part.graph));
    parts_.push_back({part.device, partition_executor(std::move(pg))});
  }
  if (!remote_parts.empty())
    remote_graph_ = remote_->register_partitions(std::move(remote_parts), std::move(step_edges.reply_edges));
  // Two devices each with a big node: their work can overlap, so the pool helps run the step.
  int partitions_with_big_nodes = 0;
  for (const Part& part : parts_) partitions_with_big_nodes += part.executor->has_big_nodes();
  parallel_ = partitions_with_big_nodes >= 2;
  // Feeds and fetches are on local partitions: on the host in a cluster.
  auto local_slot = [&](const PartitionSlot& s) {
    const int local = local_index[static_cast<size_t>(s.partition)];
    if (local < 0) throw Internal("[" + options.name + "] a feed or fetch was placed on another task");
    return std::pair<int, int>{local, s.index};
  };
  for (const PartitionSlot& s : p.args) feed_slots_.push_back(local_slot(s));
  for (const PartitionSlot& s : p.results) fetch_slots_.push_back(local_slot(s));
}

CompiledGraph::~CompiledGraph() = default;

std::vector<Tensor> CompiledGraph::run(std::span<const Tensor> feeds) const {
  if (feeds.size() != feed_metas_.size())
    throw InvalidArgument("[executor] expected " + std::to_string(feed_metas_.size()) + " feeds, got " +
                          std::to_string(feeds.size()));
  for (size_t i = 0; i < feeds.size(); ++i)
    if (!feed_matches(feed_metas_[i], feeds[i])) throw_bad_feed(feed_names_[i], feed_metas_[i], feeds[i]);
  return run_checked_feeds(feeds);
}

std::vector<Tensor> CompiledGraph::run_checked_feeds(std::span<const Tensor> feeds) const {
  if (parts_.size() == 1 && !remote_graph_)
    return parts_[0].executor->run_checked_feeds(feeds, {.collectives = collectives_,
                                                         .stall_warning = step_limits_.stall_warning,
                                                         .stall_timeout = step_limits_.stall_timeout,
                                                         .owner = name_.c_str()});
  return run_partitioned(feeds);
}

std::vector<Tensor> CompiledGraph::run_partitioned(std::span<const Tensor> feeds) const {
  std::vector<std::vector<Tensor>> part_feeds(parts_.size());
  for (size_t p = 0; p < parts_.size(); ++p)
    part_feeds[p].resize(parts_[p].executor->graph().args.size());
  for (size_t i = 0; i < feeds.size() && i < feed_slots_.size(); ++i)
    part_feeds[static_cast<size_t>(feed_slots_[i].first)][static_cast<size_t>(feed_slots_[i].second)] = feeds[i];
  std::vector<std::vector<Tensor>> part_fetches(parts_.size());
  std::vector<Executor::Part> parts;
  for (size_t p = 0; p < parts_.size(); ++p) parts.push_back({parts_[p].executor.get(), part_feeds[p], &part_fetches[p]});

  Rendezvous& rendezvous = remote_ ? remote_->rendezvous() : process_local_rendezvous();
  const int64_t step = remote_ ? remote_->next_step_id() : next_step_id();
  struct Cleanup {
    Rendezvous& r;
    int64_t step;
    ~Cleanup() { r.cleanup_step(step); }
  } cleanup{rendezvous, step};
  if (!remote_graph_) {
    Executor::run_together(parts, {.step_id = step,
                                   .rendezvous = &rendezvous,
                                   .collectives = collectives_,
                                   .parallel = parallel_,
                                   .stall_warning = step_limits_.stall_warning,
                                   .stall_timeout = step_limits_.stall_timeout,
                                   .owner = name_.c_str()});
  } else {
    // The other tasks run their partitions meanwhile; the first error anywhere cancels `cancel`,
    // which stops this task's part and tells the others to abort.
    CancellationManager cancel;
    // Small feeds bound for other tasks go in their RunStep; this process's Sends of them are
    // skipped (scheduler/step_rendezvous.h).
    std::vector<StepTensor> step_tensors;
    std::set<std::string, std::less<>> sent_in_message;
    for (const StepMessageEdges::FeedSend& f : feed_sends_) {
      const Tensor& value = feeds[static_cast<size_t>(f.feed)];
      if (!fits_step_message(value)) continue;
      RendezvousKey key = f.key;
      key.step_id = step;
      step_tensors.push_back({std::move(key), value, false});
      sent_in_message.insert(f.transfer);
    }
    StepRendezvous step_rendezvous(rendezvous, {.skip = sent_in_message.empty() ? nullptr : &sent_in_message});
    remote_graph_->start_step(step, cancel, step_limits_, std::move(step_tensors));
    std::exception_ptr local_error, remote_error;
    std::unique_ptr<Executor::RunningStep> local;
    try {
      local = Executor::start_together(parts, {.step_id = step,
                                               .rendezvous = &step_rendezvous,
                                               .collectives = collectives_,
                                               .cancellation = &cancel,
                                               .senders_in_process = false,
                                               .parallel = parallel_});
    } catch (...) {
      local_error = std::current_exception();
      cancel.cancel(local_error);
    }
    try {
      remote_graph_->finish_step(step, local.get());
    } catch (...) {
      remote_error = std::current_exception();
    }
    if (local) {
      // A step ended for running too long: a kernel of this process's part that never returns
      // would hold finish() forever; past the reclaim grace the process ends instead.
      std::optional<StallWatch> reclaim;
      if (ended_by_deadline(cancel.error()) || ended_by_deadline(remote_error))
        reclaim.emplace(StallWatch::Options{.owner = name_, .step_id = step, .reclaim_only = true},
                        [&local] { return local->in_flight(); }, nullptr);
      try {
        local->finish();
      } catch (...) {
        local_error = std::current_exception();
        cancel.cancel(local_error);
      }
    }
    // The error that came first, wherever it came from, is the one the caller sees.
    if (std::exception_ptr first = cancel.error()) std::rethrow_exception(first);
    if (local_error) std::rethrow_exception(local_error);
    if (remote_error) std::rethrow_exception(remote_error);
  }

  std::vector<Tensor> out;
  out.reserve(fetch_slots_.size());
  for (const auto& [part, index] : fetch_slots_)
    out.push_back(part_fetches[static_cast<size_t>(part)][static_cast<size_t>(index)]);  // a fetch may repeat
  return out;
}

std::map<std::string, std::string> CompiledGraph::placement() const {
  std::map<std::string, std::string> out;
  for (int32_t id : graph_->node_ids()) out[graph_->node(id).name] = graph_->node(id).assigned_device;
  return out;
}

std::unique_ptr<CompiledGraph> compile_function(GraphIR body, CompileOptions options) {
  CompileSpec spec;
  for (int32_t a : body.args) spec.feeds.push_back({a, 0});
  spec.fetches = body.results;
  for (int32_t id : body.node_ids())
    if (has_side_effect(body.node(id))) spec.targets.push_back(id);
  return std::make_unique<CompiledGraph>(std::move(body), std::move(spec), std::move(options));
}

int CompiledGraph::num_planned_nodes() const {
  int n = 0;
  for (const Part& p : parts_) n += p.executor->num_planned_nodes();
  return n;
}

}  // namespace weft
