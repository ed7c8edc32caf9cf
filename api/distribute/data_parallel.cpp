#include "api/distribute/data_parallel.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <source_location>

#include "api/context.h"
#include "api/dispatch.h"
#include "api/distribute/gradient_buckets.h"
#include "api/distribute/replicate.h"
#include "api/graph_builder.h"
#include "api/variable.h"
#include "cluster/cluster.h"
#include "cluster/cluster_placement.h"
#include "comm/step_collectives.h"
#include "runtime/device_name.h"
#include "runtime/shard_split.h"
#include "runtime/tensor_internals.h"
#include "scheduler/graph_compiler.h"

namespace weft::distribute {

// What every function of one DataParallel shares: the replicas, the cluster session their
// variables live in, and whether those variables need replica 0's values again.
class DataParallelState {
 public:
  DataParallelState(const Cluster& cluster, DataParallelOptions options);

  DataParallelOptions options;
  ExecutionTarget target;  // the cluster's devices and tasks, one session for every graph
  ReplicaLayout layout;
  ReplicaVariables variables;
  // Steps and broadcasts run one at a time: collectives of two steps must not interleave.
  std::mutex step_mu;
  std::vector<std::weak_ptr<const CompiledGraph>> broadcasts;
  uint64_t synced_writes = ~uint64_t{0};  // eager_variable_writes() at the last broadcast
  bool failed = false;                     // the last step failed: reset collectives, broadcast

  CompileOptions compile_options(const std::string& what) const {
    CompileOptions o{.optimize = options.optimize, .name = what, .collectives = &process_step_collectives()};
    // Watched by the chief in a cluster, by the process's stall watchdog alone (scheduler/stall_watchdog.h).
    o.stall_warning = std::chrono::milliseconds(options.stall_warning_ms);
    o.stall_timeout = std::chrono::milliseconds(options.stall_timeout_ms);
    if (target.spans_tasks()) {
      target.apply(o);
      o.step_timeout = std::chrono::milliseconds(options.operation_timeout_ms);
    }
    return o;
  }
  // Under step_mu: brings every replica's variables to replica 0's values when they may differ.
  void sync_variables(bool force);
  // Under step_mu: one step of `graph` after sync_variables. Replicas may stop at different points
  // when it fails: their collectives and variables are then set right before the next step.
  std::vector<Tensor> run_step(const CompiledGraph& graph, std::span<const Tensor> feeds) {
    sync_variables(/*force=*/false);
    try {
      return graph.run(feeds);
    } catch (...) {
      failed = true;
      throw;
    }
  }
};

namespace {

std::vector<std::string> choose_devices(const std::vector<DeviceInfo>& all, const DataParallelOptions& o) {
  std::vector<std::string> chosen;
  if (!o.devices.empty()) {
    for (const std::string& want : o.devices) {
      const DeviceSpec spec = DeviceSpec::parse(want);
      std::vector<std::string> hits;
      for (const DeviceInfo& d : all)
        if (spec.matches(DeviceSpec::parse(d.name))) hits.push_back(d.name);
      if (hits.size() != 1) {
        std::string names;
        for (const DeviceInfo& d : all) names += "\n  " + d.name;
        throw InvalidArgument("[DataParallel] device '" + want + "' matches " + std::to_string(hits.size()) +
                              " devices of the cluster (it must name exactly one); the devices are:" + names);
      }
      if (std::find(chosen.begin(), chosen.end(), hits[0]) != chosen.end())
        throw InvalidArgument("[DataParallel] device '" + hits[0] + "' is listed twice");
      chosen.push_back(hits[0]);
    }
    return chosen;
  }
  std::string type = o.device_type;
  if (type.empty()) {
    type = "CPU";
    for (const DeviceInfo& d : all)
      if (d.type == "GPU") type = "GPU";
  }
  if (type != "CPU" && type != "GPU")
    throw InvalidArgument("[DataParallel] device_type must be \"CPU\", \"GPU\" or empty, got '" + type + "'");
  for (const DeviceInfo& d : all)
    if (d.type == type) chosen.push_back(d.name);
  if (chosen.empty()) throw InvalidArgument("[DataParallel] the cluster has no " + type + " device");
  return chosen;
}

std::string join(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : sep) + n;
  return out;
}

}  // namespace

DataParallelState::DataParallelState(const Cluster& cluster, DataParallelOptions o)
    : options(std::move(o)), target(execution_target(cluster)) {
  layout.host_device = target.host_device();
  layout.devices = choose_devices(target.devices(), options);
  if (target.spans_tasks()) {
    // Replica 0 must be this process's: it uses the model's own variables.
    const std::string& own_task = target.task_names()[static_cast<size_t>(target.rank())];
    const std::string chief = own_task + "/device:";
    if (layout.devices[0].rfind(chief, 0) != 0)
      throw InvalidArgument("[DataParallel] the first replica's device must be one of this process's (" + own_task +
                            "), got '" + layout.devices[0] + "'");
    // The collectives span every task of the cluster.
    std::vector<std::string> missing;
    for (const std::string& name : target.task_names()) {
      const std::string task = name + "/device:";
      if (std::none_of(layout.devices.begin(), layout.devices.end(),
                       [&](const std::string& d) { return d.rfind(task, 0) == 0; }))
        missing.push_back(name);
    }
    if (!missing.empty())
      throw InvalidArgument("[DataParallel] every task of the cluster needs a replica (the gradient all-reduce spans "
                            "them all); none on " + join(missing, ", "));
  }
}

void DataParallelState::sync_variables(bool force) {
  const uint64_t writes = eager_variable_writes();
  if (!force && !failed && writes == synced_writes) return;
  if (failed) target.reset_collectives();
  failed = false;
  for (auto it = broadcasts.begin(); it != broadcasts.end();) {
    std::shared_ptr<const CompiledGraph> graph = it->lock();
    if (!graph) {
      it = broadcasts.erase(it);
      continue;
    }
    graph->run({});
    ++it;
  }
  synced_writes = writes;
}

struct DataParallelCore::Impl {
  std::shared_ptr<DataParallelState> state;
  std::string name;
  struct Trace {
    std::vector<TensorSpec> specs;  // the batch dim is -1
    std::string input_key;          // replicas reading their own input: which input
    std::shared_ptr<GraphIR> traced;  // replica 0's step, as traced
    ReplicaInputs inputs;
    std::shared_ptr<const CompiledGraph> step;
    std::shared_ptr<const CompiledGraph> broadcast;
    // A failed step may have aborted its NCCL groups' communicators (on some tasks, not others):
    // the next call rebuilds the step under fresh ids.
    bool nccl_groups_spent = false;
  };
  std::vector<std::unique_ptr<Trace>> traces;
  int tracing_count = 0;

  Trace& trace(const std::vector<TensorSpec>& specs, const std::string& input_key, const ReplicaInputs& inputs,
               const FunctionBody& body);
  Trace& find_or_trace(const std::vector<TensorSpec>& specs, const std::string& input_key,
                       const ReplicaInputs& inputs, const FunctionBody& body);
  // Replicates and compiles t.traced into t.step.
  void compile_step(Trace& t);
  // One step of `t` (under step_mu); a failure spends its NCCL groups.
  std::vector<Tensor> run(Trace& t, std::span<const Tensor> feeds);
};

DataParallelCore::DataParallelCore(std::shared_ptr<DataParallelState> state, std::string name)
    : impl_(std::make_unique<Impl>()) {
  impl_->state = std::move(state);
  impl_->name = std::move(name);
}
DataParallelCore::~DataParallelCore() = default;
int DataParallelCore::tracing_count() const { return impl_->tracing_count; }

DataParallelCore::Impl::Trace& DataParallelCore::Impl::find_or_trace(const std::vector<TensorSpec>& specs,
                                                                     const std::string& input_key,
                                                                     const ReplicaInputs& inputs,
                                                                     const FunctionBody& body) {
  for (auto& t : traces)
    if (t->input_key == input_key && t->specs.size() == specs.size() &&
        std::equal(specs.begin(), specs.end(), t->specs.begin(),
                   [](const TensorSpec& a, const TensorSpec& b) { return a.dtype == b.dtype && a.shape == b.shape; })) {
      if (t->nccl_groups_spent) {
        renew_nccl_ids(*t->traced);
        compile_step(*t);
        t->nccl_groups_spent = false;
      }
      return *t;
    }
  return trace(specs, input_key, inputs, body);
}

void DataParallelCore::Impl::compile_step(Trace& t) {
  DataParallelState& s = *state;
  ReplicatedGraph step = replicate(*t.traced, t.specs.size(), s.layout, s.variables, t.inputs);
  t.step = std::make_shared<CompiledGraph>(
      std::move(step.graph), CompileSpec{.feeds = step.feeds, .fetches = step.results, .targets = step.targets},
      s.compile_options("data-parallel step '" + name + "'"));
}

std::vector<Tensor> DataParallelCore::Impl::run(Trace& t, std::span<const Tensor> feeds) {
  try {
    return state->run_step(*t.step, feeds);
  } catch (...) {
    t.nccl_groups_spent = replicas_use_nccl(state->layout);
    throw;
  }
}

DataParallelCore::Impl::Trace& DataParallelCore::Impl::trace(const std::vector<TensorSpec>& specs,
                                                             const std::string& input_key,
                                                             const ReplicaInputs& inputs, const FunctionBody& body) {
  DataParallelState& s = *state;
  const size_t replicas = s.layout.devices.size();
  auto graph = std::make_shared<GraphIR>();
  GraphBuilder builder(graph, GraphBuilder::Mode::kFunction);
  if (tracing_count > 0)
    builder.set_variable_creation_allowed(
        false, "data-parallel step '" + name +
                   "' creates a variable while retracing; variables may only be created on the first trace");
  const auto here = std::source_location::current();
  {
    ObserversHidden hidden;
    RecorderScope recording(&builder);
    std::vector<Tensor> args;
    for (size_t i = 0; i < specs.size(); ++i)
      args.push_back(builder.placeholder(specs[i].dtype, specs[i].shape, "input_" + std::to_string(i), here));
    Tensor weight = builder.placeholder(DType::Float32, Shape{}, kReplicaWeightArg, here);
    std::optional<GradientAllReducer> reducer;
    if (replicas > 1)
      reducer.emplace(weight,
                      CollectiveGroup{.key = new_collective_group_key(), .members = s.layout.devices, .instances = kInstancesUnknown,
                                      .nccl_id = nccl_id_for_new_group(s.layout)},
                      BucketOptions{s.options.bucket_bytes, s.options.first_bucket_bytes});
    ReplicaContextScope in_replica(reducer ? &*reducer : nullptr);
    std::vector<Tensor> results = body(args);
    if (results.empty()) throw InvalidArgument("[DataParallel '" + name + "'] the step returns nothing; return its loss");
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].defined())
        throw InvalidArgument("[DataParallel '" + name + "'] result " + std::to_string(i) + " is an empty Tensor handle");
      graph->results.push_back(builder.endpoint_of(results[i], here));
    }
  }
  ++tracing_count;

  auto t = std::make_unique<Trace>();
  t->specs = specs;
  t->input_key = input_key;
  t->traced = graph;
  t->inputs = inputs;
  compile_step(*t);
  ReplicatedGraph broadcast =
      broadcast_graph(*graph, s.layout, s.variables, new_collective_group_key(), nccl_id_for_new_group(s.layout));
  if (!broadcast.targets.empty()) {
    t->broadcast = std::make_shared<CompiledGraph>(std::move(broadcast.graph),
                                                   CompileSpec{.targets = broadcast.targets},
                                                   s.compile_options("data-parallel broadcast of '" + name + "'"));
    s.broadcasts.push_back(t->broadcast);
  }
  traces.push_back(std::move(t));
  return *traces.back();
}

std::vector<Tensor> DataParallelCore::call(std::span<const Tensor> args, const FunctionBody& body) {
  Impl& im = *impl_;
  DataParallelState& s = *im.state;
  const int64_t replicas = static_cast<int64_t>(s.layout.devices.size());
  if (args.empty()) throw InvalidArgument("[DataParallel '" + im.name + "'] the step takes at least one tensor");
  int64_t rows = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& a = args[i];
    if (!a.defined() || a.is_symbolic())
      throw InvalidArgument("[DataParallel '" + im.name + "'] argument " + std::to_string(i) +
                            " must be a concrete tensor (the global batch)");
    if (a.rank() < 1)
      throw InvalidArgument("[DataParallel '" + im.name + "'] argument " + std::to_string(i) +
                            " is a scalar; every argument is a batch, split along axis 0 over the replicas");
    if (rows >= 0 && a.shape()[0] != rows)
      throw InvalidArgument("[DataParallel '" + im.name + "'] argument " + std::to_string(i) + " has " +
                            std::to_string(a.shape()[0]) + " rows and argument 0 has " + std::to_string(rows) +
                            "; every argument is split along axis 0, so they must agree");
    rows = a.shape()[0];
  }
  if (rows < replicas)
    throw InvalidArgument("[DataParallel '" + im.name + "'] a global batch of " + std::to_string(rows) +
                          " rows cannot be split over " + std::to_string(replicas) +
                          " replicas: each needs at least one row");

  std::vector<TensorSpec> specs;
  for (const Tensor& a : args) {
    Shape shape = a.shape();
    shape[0] = -1;
    specs.push_back({a.dtype(), shape});
  }
  std::lock_guard lock(s.step_mu);
  Impl::Trace* trace = &im.find_or_trace(specs, "", nullptr, body);

  // Replica r gets rows [start, start + n) of every argument, and weight n / rows.
  std::vector<Tensor> feeds;
  for (int64_t r = 0; r < replicas; ++r) {
    const auto [start, n] = shard_rows(rows, replicas, r);  // the split ReadShardedBatch makes too
    for (const Tensor& a : args) {
      if (replicas == 1) {
        feeds.push_back(a);
        continue;
      }
      Shape shape = a.shape();
      shape[0] = n;
      const size_t row_bytes = a.nbytes() / static_cast<size_t>(rows);
      const Tensor host = a.device_ptr() && a.device_ptr()->type() == DeviceType::CPU ? a : a.to(nullptr);
      feeds.push_back(Tensor::from_host(a.dtype(), shape,
                                        static_cast<const char*>(raw_data(host)) + static_cast<size_t>(start) * row_bytes));
    }
    const float weight = static_cast<float>(static_cast<double>(n) / static_cast<double>(rows));
    feeds.push_back(Tensor::from_host(DType::Float32, Shape{}, &weight));
  }

  return im.run(*trace, feeds);
}

std::vector<Tensor> DataParallelCore::call_reading(const std::vector<TensorSpec>& specs, const std::string& input_key,
                                                  const ReplicaInputs& inputs, const FunctionBody& body) {
  DataParallelState& s = *impl_->state;
  std::lock_guard lock(s.step_mu);
  return impl_->run(impl_->find_or_trace(specs, input_key, inputs, body), {});
}

DataParallel::DataParallel(const Cluster& cluster, DataParallelOptions options)
    : state_(std::make_shared<DataParallelState>(cluster, std::move(options))) {}
DataParallel::~DataParallel() = default;
int DataParallel::num_replicas() const { return static_cast<int>(state_->layout.devices.size()); }
const std::vector<std::string>& DataParallel::replica_devices() const { return state_->layout.devices; }

void DataParallel::broadcast_variables() {
  std::lock_guard lock(state_->step_mu);
  state_->sync_variables(/*force=*/true);
}

std::vector<Tensor> DataParallel::replica_values(const Variable& var) {
  if (!var.defined()) throw InvalidArgument("[DataParallel] replica_values of an undefined variable");
  static const OpDef& read = op_def("ReadVariable");
  DataParallelState& s = *state_;
  std::lock_guard lock(s.step_mu);
  s.sync_variables(/*force=*/false);
  GraphIR g;
  CompileSpec spec;
  const std::shared_ptr<VariableState> state = var.state();
  for (size_t r = 0; r < s.layout.devices.size(); ++r) {
    auto [key, copy] = s.variables.for_replica(state, state->name, r, s.layout.devices[r]);
    g.variables[key] = copy;
    Node& n = g.add_node(read, {}, Attrs{{"var", key}, {"dtype", state->dtype}, {"shape", state->shape}},
                         {TensorMeta{state->dtype, state->shape}}, "replica_values/" + key);
    n.requested_device = s.layout.devices[r];
    spec.fetches.push_back({n.id, 0});
  }
  CompiledGraph values(std::move(g), std::move(spec), s.compile_options("DataParallel::replica_values"));
  return values.run({});
}

}  // namespace weft::distribute
