// Executor: runs a graph. The plan is made once (which nodes the fetches and targets need, their
// topological order, pending counts, how many readers each value has); each run then walks the
// ready nodes, releasing every value after its last reader so its buffer goes back to the
// allocator's cache for the next node (memory planning by liveness), and writing an elementwise
// op's result over an input that has no other reader.
//
//   auto graph = std::make_shared<const GraphIR>(std::move(g));
//   Executor exec(graph, {.feeds = {{x_id, 0}}, .fetches = {{y_id, 0}}, .targets = {train_id}});
//   std::vector<Tensor> out = exec.run({batch});        // one tensor per fetch
//
// Each node runs on its assigned device (cpu:0 when it has none), with that device's kernel, its
// outputs allocated there. Independent nodes run in parallel on the inter-op pool when the graph
// has enough independent work to pay for the hand-off; chains run on the calling thread. A kernel
// error aborts the run and is raised with the node's name and the user's source line. run() may
// be called from several threads at once.
//
// The partitions of one graph (scheduler/passes/partition.h) run together as one step with
// run_together: their Send and Recv nodes meet in a rendezvous. An asynchronous kernel (Recv)
// completes through a callback, so no thread ever blocks waiting for another partition; the
// first error anywhere cancels the step everywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/graph.h"
#include "runtime/kernel_registry.h"

namespace weft {

class CancellationManager;
class Collectives;
class Rendezvous;

// What the executors running one step share.
struct StepOptions {
  int64_t step_id = 0;                         // part of every rendezvous key of the step
  Rendezvous* rendezvous = nullptr;            // where Send and Recv meet; null: the step has none
  Collectives* collectives = nullptr;          // where collective kernels run; null: the step has none
  CancellationManager* cancellation = nullptr; // null: run_together makes one for the step
  // Every Send a Recv of the step waits for is in one of the parts run together (one process).
  // Then a step whose only unfinished nodes are Recvs can never finish: it fails with Internal
  // naming them instead of waiting forever. The cluster sets it false: peers send from afar.
  bool senders_in_process = true;
  // Whether the inter-op pool helps run the step. Off, the calling thread runs every node itself
  // (waking pool threads costs more than tiny nodes do); a part whose own graph has parallel
  // work (Executor::parallel()) turns it on regardless.
  bool parallel = false;
  // Limits of the process's stall watchdog (scheduler/stall_watchdog.h): a Session's or
  // DataParallel's step in one process sets them. 0: not watched. `owner` names the step's
  // runner in reports ("Session") and must outlive the run.
  std::chrono::milliseconds stall_warning{0};
  std::chrono::milliseconds stall_timeout{0};
  const char* owner = "";
};

struct ExecutorSpec {
  std::vector<Endpoint> feeds;    // values supplied by each run, in run()'s argument order
  std::vector<Endpoint> fetches;  // values returned by run(), in this order
  std::vector<int32_t> targets;   // nodes that must run though nothing fetched needs them
  Device* device = nullptr;       // where nodes without an assigned device run; null: cpu:0
};

// Whether a fed value fits the dtype and (partial) shape of what it feeds; checked on every run.
bool feed_matches(const TensorMeta& meta, const Tensor& value);
// InvalidArgument naming the fed tensor and saying what is wrong with `value`.
[[noreturn]] void throw_bad_feed(const std::string& name, const TensorMeta& meta, const Tensor& value);

enum class Parallelism { kAuto, kSequential, kParallel };

class Executor {
 public:
  Executor(std::shared_ptr<const GraphIR> graph, ExecutorSpec spec, Parallelism parallelism = Parallelism::kAuto);
  // The executor of a function body: feeds are its args, fetches its results, targets every node
  // with a side effect.
  // Nodes without an assigned device run on `device` (null: cpu:0).
  static std::unique_ptr<Executor> for_function(std::shared_ptr<const GraphIR> body, Device* device = nullptr);
  ~Executor();

  std::vector<Tensor> run(std::span<const Tensor> feeds) const;
  // run() without checking each feed's dtype and shape against its placeholder, for a caller that
  // has just checked the same thing (weft::function matches every call against its signature).
  // `step`: the step this run is part of (a function body's run inside a node of a step: the
  // body's collectives take part in the step's groups); default: a run of its own.
  std::vector<Tensor> run_checked_feeds(std::span<const Tensor> feeds, const StepOptions& step = {}) const;

  // One executor's part in a step run by run_together.
  struct Part {
    const Executor* executor;
    std::span<const Tensor> feeds;  // checked by the caller, as for run_checked_feeds
    std::vector<Tensor>* fetches;   // filled with the executor's fetches
  };
  // Runs every part as one step: the calling thread and the inter-op pool run the ready nodes of
  // all of them; a Recv waiting for its tensor holds no thread. The first error cancels the
  // step (the rendezvous aborts its transfers) and is rethrown once every part has stopped.
  static void run_together(std::span<const Part> parts, const StepOptions& options);

  // A step started by start_together and driven by its caller, who decides how to wait (TF's
  // asynchronous executor): run_ready() runs what is ready on the calling thread and returns, so
  // a cluster process can do its own work between calls (drive the MPI progress engine, which
  // completes the step's Recvs and collectives); finish() waits plainly for the rest. The executor
  // itself never calls anything above it.
  class RunningStep {
   public:
    ~RunningStep();  // waits for the step to be over if finish() was not called
    RunningStep(const RunningStep&) = delete;
    RunningStep& operator=(const RunningStep&) = delete;
    // Runs the ready nodes on the calling thread (the inter-op pool helps where the parts have
    // parallel work) until none is ready; whether the step is over. Never waits.
    bool run_ready();
    // Calls `wake` (without the step's locks) whenever nodes become ready while the caller is
    // away from run_ready (a helper finished a node, a Recv completed on another thread), so a
    // caller that waits for something else meanwhile comes back for them. Before run_ready.
    void wake_with(std::function<void()> wake);
    // Runs the rest, sleeping on the step's condition variable while nothing is ready; then
    // rethrows the step's first error or fills every part's fetches. Call once.
    void finish();
    // The nodes running now (a kernel on some thread, or an asynchronous one waiting: a Recv, a
    // collective), for stall reports. From any thread, while the step is alive.
    struct InFlight {
      std::string node;        // Node::describe(): its name, op and the user's file:line
      std::string op;          // the node's op type, "CollectiveAllReduce"
      int64_t running_ms = 0;  // within 100 ms (runtime/coarse_clock.h)
      bool waiting = false;    // an asynchronous kernel waiting for another partition or process
    };
    std::vector<InFlight> in_flight() const;

   private:
    friend class Executor;
    struct State;
    explicit RunningStep(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
  };
  // The same step as run_together, started: the initial nodes are queued, none has run yet. The
  // parts, their feeds and fetches, and the options' rendezvous and cancellation must outlive it.
  static std::unique_ptr<RunningStep> start_together(std::span<const Part> parts, const StepOptions& options);

  const GraphIR& graph() const { return *graph_; }
  // How many nodes a run executes (after cutting at the feeds).
  int num_planned_nodes() const;
  bool parallel() const { return parallel_; }
  // Whether a planned node has large (or unknown) outputs: work worth overlapping with another
  // partition's (CompiledGraph decides StepOptions::parallel with it).
  bool has_big_nodes() const { return has_big_nodes_; }

 private:
  struct Step;
  struct RunState;
  class Context;
  class Frame;
  friend class Context;
  friend class Frame;
  friend class RunningStep;

  template <bool kConcurrent>
  void run_step(const Step& step, RunState& state, std::vector<Tensor>& scratch) const;
  // Stores a finished step's outputs and counts its reads of its inputs.
  template <bool kConcurrent>
  void commit_step(const Step& step, RunState& state, std::span<Tensor> ins, std::span<Tensor> outs) const;
  void run_sequential(RunState& state) const;
  // run_sequential under the stall watchdog: each node's start is recorded for its reports, and a
  // step it ends stops at the next node.
  void run_sequential_watched(RunState& state, const StepOptions& step) const;
  // A run state for one run, the spare one when free.
  std::unique_ptr<RunState> take_run_state(std::span<const Tensor> feeds, const StepOptions& options) const;
  void give_back(std::unique_ptr<RunState> state) const;
  std::vector<Tensor> collect_fetches(RunState& state) const;
  // Appends the nodes of `state` running now (started_ms set), for stall reports. A ready-queue
  // run calls it holding the lock that guards its asynchronous slots' `waiting`.
  void append_in_flight(const RunState& state, int64_t now_ms, std::vector<RunningStep::InFlight>& out) const;
  void check_feed(size_t i, const Tensor& value) const;
  void check_feed_count(size_t count) const;
  const Executor& body_executor(const GraphIR& body, Device& device) const;

  std::shared_ptr<const GraphIR> graph_;
  ExecutorSpec spec_;
  std::vector<Step> plan_;                 // topological order
  std::vector<int32_t> value_readers_;     // per value id: reads by planned nodes plus fetches
  std::vector<int32_t> fetch_values_;      // value id of each fetch
  std::vector<int32_t> initial_ready_;     // plan indices with no pending inputs
  int32_t num_values_ = 0;
  int32_t num_feeds_ = 0;                  // value ids 0 .. num_feeds_ - 1 are the feeds
  bool parallel_ = false;
  bool has_big_nodes_ = false;
  int32_t num_async_ = 0;                  // asynchronous steps (Recv), each with its slot
  // How many times each kRandom node has run in this executor (KernelContext::execution): the
  // count lives with the compiled graph on the task that runs the node, so one process and a
  // cluster count alike, and concurrent nodes cannot take each other's numbers.
  std::unique_ptr<std::atomic<uint64_t>[]> run_counts_;
  mutable std::atomic<RunState*> spare_{nullptr};  // owned; a run state kept for the next run
  mutable std::mutex bodies_mu_;
  // Control-flow subgraphs, per device they run on.
  mutable std::map<std::pair<const GraphIR*, const Device*>, std::unique_ptr<Executor>> bodies_;
};

}  // namespace weft
