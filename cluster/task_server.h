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
// Requests are taken by the process's MPI progress engine (comm/mpi_progress_engine.h), in the
// order the chief sent them. Ping and AbortStep are answered at once, on the engine's driving
// thread, so a task busy with a long kernel still answers; the others queue for the serve role.
// Who serves: the serve thread, which drives the engine while it waits (the request is then read
// on the thread that handles it, with no wake-up between), and runs a RunStep itself: handing
// the step to another thread would cost a wake-up on the critical path of every step. While it
// runs a step, the standby thread takes the serve role, so requests are still handled in order;
// a RunStep it takes runs on a step thread (a new one when all are busy, so a step that waits for
// another never holds up a third). The standby thread also ends the job when the chief has been
// silent for the liveness timeout.
//
// A RunStep may come from the chief or, down the step's tree (cluster/step_tree.h), from another
// task; this task forwards it to its own subtree on arrival and answers its parent once its part
// and its subtree's are done (an error also goes to the chief at once, so the step is cancelled
// without waiting for the tree).
//
// The small tensors a RunStep carries are delivered to the rendezvous before the step runs,
// and the small sends to the chief on the graph's reply edges go back in the answer
// (scheduler/step_rendezvous.h). AbortStep cancels a running step (or one whose RunStep has not come
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
#include "scheduler/stall_watchdog.h"

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
  struct RunningStep;
  // Arms `running`'s reclaim watch, if it has none; under mu_.
  void arm_reclaim_locked(RunningStep& running, int64_t step_id);
  struct RunningStep {
    CancellationManager cancel;
    Executor::RunningStep* local = nullptr;  // while its executors run (guarded by mu_)
    // Armed when the chief ends the step for running too long: a kernel that does not return
    // within the reclaim grace ends the process (scheduler/stall_watchdog.h). Guarded by mu_.
    std::unique_ptr<StallWatch> reclaim;
  };
  // A step this task forwarded down the step's tree, or got from a task other than the chief
  // (cluster/step_tree.h): it answers `parent` once its own part and its children have.
  struct StepInTree {
    int parent = -1;
    std::set<int> children;  // still to answer
    bool own_done = false;
    StepAnswer own;
    std::vector<StepAnswer> gathered;
  };

  // A request from the chief, on the engine's driving thread.
  void on_request(ControlChannel::Message message);
  // The standby thread: takes the serve role while a step keeps the serve thread away.
  void stand_by();
  // The chief pings every second: silence means it died (under mpirun --enable-recovery nothing
  // else would end this process), so the job is ended, non-zero, by name.
  void check_chief_alive();
  void handle(const ControlRequest& request);
  void register_graph(const ControlRequest& request);
  // Runs the step on this thread (`on_serve_thread`) or posts it to a step thread.
  void start_step(const ControlRequest& request, bool on_serve_thread);
  // Runs the step; returns the sends kept for the Reply (scheduler/step_rendezvous.h).
  std::vector<StepTensor> run_step(std::shared_ptr<const RegisteredGraph> graph, int64_t step_id, RunningStep& running);
  void abort_step(int64_t step_id, std::exception_ptr error);
  // On arrival of a RunStep from `source`: remembers where its answer goes and forwards it to
  // the tasks of its subtree.
  void forward_step(ControlRequest& request, int source);
  // A child's answer for its subtree, on arrival.
  void on_step_done(ControlRequest& request, int source);
  // This task's own answer to a step: to the chief, or up the step's tree.
  void answer_step(int64_t step_id, std::exception_ptr error, std::vector<StepTensor> tensors);
  // Sends a finished subtree's answers to its parent.
  void send_up(int64_t step_id, const StepInTree& step);
  // Answers the chief's request for a stall report (cluster/stall_report.h).
  void report_stall(int64_t step_id);
  // Answers the chief's FlightRecord request `id` with this process's flight recorder; `received_us`:
  // this task's clock when the request came.
  void send_flight_record(uint64_t id, int64_t received_us);
  // Timeline recording on or off, as the chief's profiler asks; answers with the events.
  void control_timeline(const ControlRequest& request);
  void reply(const std::function<void(capnp::MessageBuilder&)>& build);
  void post(std::function<void()> work);

  ClusterRuntime& rt_;
  std::string task_;
  std::string stall_owner_;  // "task NAME": the owner of this task's reclaim watches
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<const RegisteredGraph>> graphs_;
  std::map<uint64_t, std::map<std::string, std::shared_ptr<VariableState>, std::less<>>> sessions_;
  std::map<int64_t, RunningStep*> running_;
  std::map<int64_t, std::exception_ptr> aborted_early_;  // aborts that came before their RunStep
  std::mutex tree_mu_;
  std::map<int64_t, StepInTree> tree_steps_;  // by step id
  // Step threads: idle ones wait for work; a new one is made when none is idle.
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> work_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;

  // The serve role: requests waiting for it, in the chief's order.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<ControlRequest> queue_;
  bool serve_in_step_ = false;  // the serve thread runs a step: the standby thread serves
  bool standby_busy_ = false;   // the standby thread handles a request: the serve thread waits for it
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<std::chrono::steady_clock::rep> heard_from_chief_{0};  // steady_clock ticks
};

}  // namespace weft
