// Session: runs a Graph, TF1 style.
//
//   Session sess(g);
//   auto out = sess.run({{"x:0", batch}}, {"y:0"});          // feeds, fetches by name
//   sess.run({{x, batch}}, {loss}, /*targets=*/{train});      // by handle: Tensor or Operation
//   sess.run({{x, batch}}, {loss}, {"train"});                // or by name
//
// Only what the fetches and targets need runs; a feed overrides any tensor (its producers do not
// run unless something else needs them). As in TensorFlow 1, an assignment or optimizer update
// runs only when a fetch or target needs it: the train op returned by apply_gradients, the value
// returned by assign. A read of a variable made after an assignment sees it when both run in one
// step, but fetching the read alone does not run the assignment. A needed placeholder left
// unfed, or a feed whose dtype or shape contradicts its tensor, is an InvalidArgument naming it.
// Variables created in the graph are initialised on the session's first run (those created
// later, on the first run after). Each distinct (feeds, fetches, targets) combination is compiled
// once (scheduler/graph_compiler.h: optimised, placed over the devices, partitioned) and cached;
// run() may be called from several threads at once, sharing the plans.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/graph.h"
#include "api/stall_limits.h"

namespace weft {

struct CompileOptions;
struct Endpoint;  // runtime/graph.h
class Cluster;
class ExecutionTarget;

// A tensor named by string ("y:0", "y") or by handle.
class TensorRef {
 public:
  TensorRef(const char* name) : name_(name) {}  // NOLINT: implicit by design
  TensorRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  TensorRef(const Tensor& t) : tensor_(t) {}  // NOLINT
  // The endpoint in `g`; NotFound / InvalidArgument when it is not a tensor of `g`.
  Endpoint resolve(const GraphIR& g) const;

 private:
  std::string name_;
  Tensor tensor_;
};

// An operation named by string or handle, for targets.
class OperationRef {
 public:
  OperationRef(const char* name) : name_(name) {}  // NOLINT
  OperationRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  OperationRef(const Operation& op);  // NOLINT
  OperationRef(const Tensor& t);  // NOLINT: the tensor's producing operation
  // The node id in `g`; NotFound / InvalidArgument when it is not an operation of `g`.
  int32_t resolve(const GraphIR& g) const;

 private:
  std::string name_;
  std::shared_ptr<const void> graph_;  // with id_, for handles: the graph the node belongs to
  int32_t id_ = -1;
};

struct SessionOptions {
  bool optimize = true;  // run the pass pipeline on each plan
  // Print "node (Op) -> device" on stderr for every node of each new plan, as TensorFlow does.
  bool log_device_placement = false;
  // Off: a node whose requested device cannot run it is an error instead of a notice.
  bool allow_soft_placement = true;
  // In a cluster: a step still running after this many milliseconds is cancelled everywhere and
  // raised as DeadlineExceeded naming the tasks still running (TensorFlow's
  // operation_timeout_in_ms). 0: no deadline (a lost task is still reported by liveness).
  int64_t operation_timeout_ms = 0;
  // A step still running after stall_warning_ms prints what it is running and waiting for (in a
  // cluster, on the chief, per task: kernels, Recvs, collectives and the members they wait for,
  // MPI transfers; each with its node and file:line); after stall_timeout_ms it is ended as
  // DeadlineExceeded carrying that report, and a kernel that then does not return within
  // WEFT_STALL_RECLAIM_MS (10 s) ends its process (scheduler/stall_watchdog.h). 0 turns either off.
  int64_t stall_warning_ms = default_stall_warning_ms();
  int64_t stall_timeout_ms = default_stall_timeout_ms();
};

class Session {
 public:
  explicit Session(const Graph& graph, SessionOptions options = {});
  // A Session over every device of a cluster (cluster/cluster.h): each plan is placed over all
  // tasks, each task gets its partitions once, feeds and fetches stay on the chief, and only step
  // ids and tensors travel per step. Errors on any task are raised here, naming the task.
  Session(const Graph& graph, const Cluster& cluster, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::vector<Tensor> run(const std::vector<std::pair<TensorRef, Tensor>>& feeds, const std::vector<TensorRef>& fetches,
                          const std::vector<OperationRef>& targets = {});
  std::vector<Tensor> run(const std::vector<TensorRef>& fetches) { return run({}, fetches); }

  const Graph& graph() const { return graph_; }
  // Node name -> full device name ("/job:localhost/replica:0/task:0/device:CPU:1") for every node
  // the session's runs have placed so far (nodes made by the passes under their own names).
  std::map<std::string, std::string> placement() const;

 private:
  struct Plan;
  const Plan& plan_for(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                       const std::vector<int32_t>& targets);
  void initialize_variables();
  CompileOptions compile_options() const;

  Graph graph_;
  SessionOptions options_;
  // Where a cluster session's graphs run (cluster/cluster_placement.h); null alone, or in a
  // cluster of this one process.
  std::unique_ptr<ExecutionTarget> cluster_;
  bool reset_collectives_ = false;       // guarded by mu_: a step with collectives failed
  mutable std::mutex mu_;   // guards planning, initialisation and placement_; runs go on outside it
  size_t initialized_ = 0;  // how many of the graph's initializers have been seen
  // A cluster session's variables whose value the chief held and has assigned on their tasks.
  std::set<std::string> sent_values_;
  size_t variables_seen_ = 0;  // how many of the graph's variables were looked at for that
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  std::map<std::string, std::string> placement_;
};

}  // namespace weft
