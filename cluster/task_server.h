// What every task but the chief does inside cluster::init: serve the chief's requests until it
// says to shut down.
//
//   TaskServer server(runtime);
//   server.serve();   // returns on Shutdown; the caller finalises MPI and exits
//
// Register decodes a graph's partitions for this task (validated like graph files), gives their
// variables the session's shared state, and makes one executor per partition. RunStep runs them
// as one step, with the MPI rendezvous, and answers ok or the error, which names this task.
//
// Who runs a step: the serve thread itself, when it is free: handing the step to another thread
// would cost a wake-up on the critical path of every step (measured: a third of a null step's
// time with 4 processes on 2 cores). While that step waits (a Recv, a collective), its thread
// goes on reading requests and testing the process's collectives
// (StepOptions::poll_while_waiting); a RunStep that comes meanwhile runs on a step thread (a new
// one when all are busy, so a step that waits for another never holds up a third). Requests are
// read by one thread at a time (poll_mu_), so they are handled in the order the chief sent them.
// A step whose kernels keep the serve thread busy does not leave the task deaf: a standby thread
// reads requests whenever the serve role has not polled for kStandbyAfter, so pings and aborts
// are still answered.
//
// The small tensors a RunStep carries are delivered to the rendezvous before the step runs,
// and the small sends to the chief on the graph's reply edges go back in the answer
// (comm/step_rendezvous.h). AbortStep cancels a running step (or one whose RunStep has not come
// yet). Ping is answered by whoever reads it, so a task busy with a long kernel still
// answers; so is TimelineControl (turn recording on or off, send the events recorded).
#pragma once

#include <atomic>
#include <chrono>
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

  // Reads and handles one request if one has come (unless another thread is reading); whether it did.
  bool poll_once();
  // The standby thread: takes the serve role while an inline step keeps the serve thread away.
  void stand_by();
  void handle(const ControlRequest& request);
  void register_graph(const ControlRequest& request);
  void start_step(const ControlRequest& request);
  // Runs the step; returns the sends kept for the Reply (comm/step_rendezvous.h). `on_serve_thread`:
  // it reads requests while it waits.
  std::vector<StepTensor> run_step(std::shared_ptr<const RegisteredGraph> graph, int64_t step_id, RunningStep& running,
                                   bool on_serve_thread);
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

  // The serve role. Whoever holds poll_mu_ reads the next request.
  static constexpr std::chrono::milliseconds kStandbyAfter{2};
  std::mutex poll_mu_;
  std::chrono::steady_clock::time_point heard_from_chief_;  // under poll_mu_
  std::atomic<std::chrono::steady_clock::rep> last_poll_{0};  // steady_clock ticks
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> serve_thread_in_step_{false};
  // A RunStep read by the serve loop (not from inside a step), run by it once the request is handled.
  std::function<void(bool on_serve_thread)> inline_step_;
  std::mutex standby_mu_;
  std::condition_variable standby_cv_;  // wakes the standby thread to stop
};

}  // namespace weft
