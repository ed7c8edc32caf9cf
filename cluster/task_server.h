// What every task but the chief does inside cluster::init: serve the chief's requests until it
// says to shut down.
//
//   TaskServer server(runtime);
//   server.serve();   // returns on Shutdown; the caller finalises MPI and exits
//
// Register decodes a graph's partitions for this task (validated like graph files), gives their
// variables the session's shared state, and makes one executor per partition. RunStep runs them
// as one step on a step thread (a new one when all are busy, so a step that waits for another
// never holds up a third), with the MPI rendezvous, and answers ok or the error, which names this
// task. The small tensors a RunStep carries are delivered to the rendezvous before the step runs,
// and the small sends to the chief on the graph's reply edges go back in the answer
// (comm/step_rendezvous.h). AbortStep cancels a running step (or one whose RunStep has not come
// yet). Ping is answered by the serve loop itself, so a task busy with a long kernel still
// answers; so is TimelineControl (turn recording on or off, send the events recorded).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_runtime.h"
#include "cluster/messages.h"
#include "runtime/cancellation.h"
#include "scheduler/executor.h"

namespace weft {

class TaskServer {
 public:
  explicit TaskServer(ClusterRuntime& runtime);
  ~TaskServer();
  void serve();

 private:
  struct RegisteredGraph {
    uint64_t session = 0;
    std::vector<std::unique_ptr<Executor>> executors;
    bool parallel = false;
    std::set<std::string, std::less<>> reply_edges;  // small sends on these go back in the Reply
  };
  struct RunningStep {
    CancellationManager cancel;
  };

  void handle(const ControlRequest& request);
  void register_graph(const ControlRequest& request);
  void start_step(const ControlRequest& request);
  // Runs the step; returns the sends kept for the Reply (comm/step_rendezvous.h).
  std::vector<StepTensor> run_step(std::shared_ptr<const RegisteredGraph> graph, int64_t step_id, RunningStep& running);
  void abort_step(int64_t step_id, std::exception_ptr error);
  // Timeline recording on or off, as the chief's profiler asks; answers with the events.
  void control_timeline(const ControlRequest& request);
  void reply(const std::function<void(capnp::MessageBuilder&)>& build);
  void post(std::function<void()> work);

  ClusterRuntime& rt_;
  std::string task_;
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<const RegisteredGraph>> graphs_;
  std::map<uint64_t, std::map<std::string, std::shared_ptr<VariableState>, std::less<>>> sessions_;
  std::map<int64_t, RunningStep*> running_;
  std::map<int64_t, std::exception_ptr> aborted_early_;  // aborts that came before their RunStep
  // Step threads: idle ones wait for work; a new one is made when none is idle.
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> work_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

}  // namespace weft
