// The graph compiler: the one way a graph becomes something runnable, shared by weft::function,
// Session and (with the cluster's devices) the cluster session.
//
//   CompiledGraph c(std::move(g), {.feeds = {{x_id, 0}}, .fetches = {{loss_id, 0}}, .targets = {train_id}});
//   std::vector<Tensor> out = c.run({batch});        // one tensor per fetch
//   c.placement();                                    // node name -> device
//
// The pipeline, in order:
//  1. Feeds become arguments: a fed tensor that is not a Placeholder's output is replaced, for
//     every reader, by a new Placeholder (so a feed overrides any tensor, as in TensorFlow 1).
//  2. Only what the fetches and targets need is kept (the executor's rule: data inputs and
//     control inputs, cut at the feeds).
//  3. Every unseeded random node left gets its stream_seed from this process's seed sequence
//     (scheduler/passes/random_streams.h); then the pass pipeline (scheduler/passes/optimize.h)
//     when `optimize` is set.
//  4. Placement over the devices (every local device by default): requested devices, kernels,
//     colocation, the cost model (scheduler/passes/place.h). Soft placements are said once on
//     stderr; log_device_placement prints every node's device there.
//  5. Partitioning into one graph per device with Send/Recv on the edges between them, and one
//     executor per partition. A graph placed on one device is not partitioned: it runs on one
//     executor exactly as before devices existed, at the same speed.
// A run of a partitioned graph is one step: a fresh step id, the process's rendezvous, and all
// executors run together (Executor::run_together). run() may be called from several threads.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "scheduler/executor.h"
#include "scheduler/passes/optimize.h"
#include "scheduler/passes/place.h"
#include "scheduler/step_message_edges.h"

namespace weft {

class CancellationManager;
class Rendezvous;
struct Partition;
struct StepTensor;

// How long a step over a cluster may take (SessionOptions, DataParallelOptions); 0 turns one off.
struct StepLimits {
  std::chrono::milliseconds timeout{0};        // the step's deadline (operation_timeout_ms)
  std::chrono::milliseconds stall_warning{0};  // past it, a stall report is printed
  std::chrono::milliseconds stall_timeout{0};  // past it, the step ends as DeadlineExceeded with the report
};

// The partitions of one graph that other processes of a cluster run (cluster/ implements it).
class RemoteGraph {
 public:
  virtual ~RemoteGraph() = default;
  // Starts step `step_id` on every task holding a partition and returns at once. When a task
  // reports an error, or is lost, `cancel` is cancelled with it (from another thread); when
  // `cancel` is cancelled here, the tasks are told to abort the step. A `timeout` above zero is
  // the step's deadline: past it, the step is cancelled with DeadlineExceeded naming the tasks
  // still running, and finish_step stops waiting for them.
  // `tensors` are this step's small sends of this process to the tasks (scheduler/step_rendezvous.h),
  // each carried to the task its key's destination device belongs to, in the step's request.
  virtual void start_step(int64_t step_id, CancellationManager& cancel, const StepLimits& limits,
                          std::vector<StepTensor> tensors) = 0;
  // Runs this process's part of the step (`local`, null when it could not start) to its end and
  // waits until every task has answered, bounded by the cluster's liveness check; rethrows the
  // first task's error as its own class, naming the task (the local part's error is the caller's
  // to take, from local->finish()). How the wait is spent is the cluster's: it drives its
  // transport between local->run_ready() calls.
  virtual void finish_step(int64_t step_id, Executor::RunningStep* local) = 0;
};

// The other processes of a cluster, as the compiler sees them.
class RemoteTasks {
 public:
  virtual ~RemoteTasks() = default;
  // Whether a full device name is one of this process's devices.
  virtual bool is_local(std::string_view device) const = 0;
  // Where this process's Send and Recv meet those of the other tasks.
  virtual Rendezvous& rendezvous() = 0;
  // Ships the partitions of the other tasks to them, once. Their small sends to this process on
  // `reply_edges` (transfer names, scheduler/step_rendezvous.h) come back in their step's answer and are delivered to this
  // process's rendezvous before the step's answer counts (scheduler/step_rendezvous.h).
  virtual std::unique_ptr<RemoteGraph> register_partitions(std::vector<Partition> partitions,
                                                           std::vector<std::string> reply_edges) = 0;
  // A step id no other step of the cluster uses.
  virtual int64_t next_step_id() = 0;
};

struct CompileSpec {
  std::vector<Endpoint> feeds;    // run()'s arguments, in order
  std::vector<Endpoint> fetches;  // run()'s results, in order
  std::vector<int32_t> targets;   // nodes that must run though no fetch needs them
};

struct CompileOptions {
  bool optimize = true;               // the pass pipeline (pruning happens regardless)
  bool log_device_placement = false;  // print "node (Op) -> device" for every node on stderr
  bool allow_soft_placement = true;   // off: a request that cannot be honoured is an error
  // Where nodes may go; empty: every device of this process (local_devices()).
  std::vector<PlacementDevice> devices;
  std::string name = "graph";         // for messages: "function 'train_step'", "Session"
  // A cluster: `devices` are then the cluster's, partitions of other tasks run there, and feeds
  // and fetches live on `host_device` (this process's CPU): fed placeholders are placed there
  // and each fetch made elsewhere is sent there.
  RemoteTasks* remote = nullptr;
  std::string host_device;
  // In a cluster: the deadline of each step, 0 for none (SessionOptions::operation_timeout_ms).
  // The stall limits (SessionOptions::stall_warning_ms and stall_timeout_ms): in a cluster the
  // chief watches each step; in one process the stall watchdog (scheduler/stall_watchdog.h).
  std::chrono::milliseconds step_timeout{0};
  std::chrono::milliseconds stall_warning{0}, stall_timeout{0};
  // Where the graph's collective nodes take part in their groups (comm/step_collectives.h); null:
  // a collective node fails with FailedPrecondition when it runs.
  Collectives* collectives = nullptr;
};

// A device as placement's cost model sees it: speeds by type and cores.
PlacementDevice placement_device(const DeviceInfo& device);
// The candidates of local placement: every device of this process.
std::vector<PlacementDevice> local_placement_devices();
// The passes for a graph that will be placed on `devices`: the CPU-only fusions only when none
// of them is a GPU (optimize runs before placement).
OptimizeOptions optimize_options_for(const std::vector<PlacementDevice>& devices);

class CompiledGraph {
 public:
  // InvalidArgument for an endpoint or target that is not in the graph, a placement rule broken
  // (scheduler/passes/place.h), or a needed Placeholder left unfed.
  CompiledGraph(GraphIR graph, CompileSpec spec, CompileOptions options = {});
  ~CompiledGraph();

  // Checks each feed's dtype and shape against what it feeds (InvalidArgument naming it).
  std::vector<Tensor> run(std::span<const Tensor> feeds) const;
  // For a caller that has checked the feeds itself (weft::function matches its signature).
  std::vector<Tensor> run_checked_feeds(std::span<const Tensor> feeds) const;

  // The graph after the passes, every node with its assigned device; args are the feeds and
  // results the fetches.
  const GraphIR& graph() const { return *graph_; }
  std::shared_ptr<GraphIR> shared_graph() const { return graph_; }
  // Node name -> full device name, for every node of graph().
  std::map<std::string, std::string> placement() const;
  // How many devices the graph runs on (one executor each).
  int num_partitions() const { return static_cast<int>(parts_.size()); }
  // Nodes one run executes, over every partition (Send and Recv included).
  int num_planned_nodes() const;

 private:
  struct Part {
    std::string device;
    std::unique_ptr<Executor> executor;
  };
  std::vector<Tensor> run_partitioned(std::span<const Tensor> feeds) const;

  std::shared_ptr<GraphIR> graph_;
  std::vector<std::string> feed_names_;  // the fed tensors' names, for errors
  std::vector<TensorMeta> feed_metas_;
  std::vector<Part> parts_;
  // Whether partitions have big nodes that may overlap on their devices (StepOptions::parallel).
  bool parallel_ = false;
  RemoteTasks* remote_ = nullptr;             // a cluster's, or null
  StepLimits step_limits_;
  std::string name_;  // CompileOptions::name: the owner of the stall watchdog's reports
  Collectives* collectives_ = nullptr;  // CompileOptions::collectives
  std::unique_ptr<RemoteGraph> remote_graph_;  // the partitions other tasks run
  // Sends of feeds to other tasks, which small feeds skip by riding in the step's RunStep.
  std::vector<StepMessageEdges::FeedSend> feed_sends_;
  // Partitioned graphs only: where each global feed and fetch lives.
  std::vector<std::pair<int, int>> feed_slots_;   // (part, index in its feeds)
  std::vector<std::pair<int, int>> fetch_slots_;  // (part, index in its fetches)
};

// The executor of one partition. Step 2 kept only needed nodes, so every node of a partition is
// needed by its results, by a target, or by a Send feeding another partition: all of them run.
std::unique_ptr<Executor> partition_executor(std::shared_ptr<const GraphIR> partition);

// A function body compiled to be called: its args are the feeds, its results the fetches, and
// every node with a side effect a target.
std::unique_ptr<CompiledGraph> compile_function(GraphIR body, CompileOptions options = {});

}  // namespace weft
