// The cluster runtime of one process: its task, the control channel, the MPI rendezvous, and
//  - on the chief, what Sessions use to run graphs over the cluster (RemoteTasks for the graph
//    compiler): partitions registered once per task, steps started and awaited, errors brought
//    back as their own class naming the task, and liveness: every task is pinged each second and
//    one silent for `liveness_timeout` is declared lost (Unavailable naming it), failing every
//    step that waits for it;
//  - on every other task, the serve loop (cluster/task_server.h).
// Every MPI request of the process goes through its MPI progress engine
// (comm/mpi_progress_engine.h): replies are handed to their waiters on the engine's driving
// thread, and a thread waiting for a step's answers drives the engine itself meanwhile.
//
// At 1000 tasks (docs/scale.md): a step travels down a tree over the tasks its graph touches and
// its answers come back up it (cluster/step_tree.h), so the chief sends and receives a bounded
// number of step messages whatever the task count; registration ships each task only its own
// partitions, once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/device.h"
#include "runtime/timeline.h"
#include "cluster/cluster_spec.h"
#include "cluster/control_channel.h"
#include "cluster/stall_report.h"
#include "comm/mpi_rendezvous.h"
#include "scheduler/graph_compiler.h"

namespace weft {

struct ControlReply;
class CancellationManager;

// One task's timeline events, gathered by the chief (ClusterRuntime::timeline_control).
struct TaskTimeline {
  int rank = 0;
  std::string task;                     // its name, "/job:worker/replica:0/task:1"
  std::vector<timeline::Event> events;  // moved onto the chief's clock
};

// How often the chief pings every task, and the shortest liveness timeout accepted: a timeout not
// well above the ping interval would find healthy idle tasks silent (and idle tasks the chief).
inline constexpr std::chrono::milliseconds kPingInterval{1000};
inline constexpr std::chrono::milliseconds kMinLivenessTimeout{2 * kPingInterval};

// The liveness timeout WEFT_LIVENESS_TIMEOUT_MS asks for (`text`, null when unset): 10 s when unset;
// a value that is not a whole number of milliseconds is reported on stderr and 10 s used; one
// below kMinLivenessTimeout is reported and raised to it.
std::chrono::milliseconds liveness_timeout_from(const char* text);

// How long a reset of the collectives waits for every task to take part.
inline constexpr std::chrono::milliseconds kCollectivesResetTimeout{10000};

class ClusterRuntime {
 public:
  ClusterRuntime(ClusterSpec spec, int rank, MPI_Comm control, MPI_Comm data);
  ~ClusterRuntime();
  ClusterRuntime(const ClusterRuntime&) = delete;
  ClusterRuntime& operator=(const ClusterRuntime&) = delete;

  const ClusterSpec& spec() const { return spec_; }
  int rank() const { return rank_; }
  // spec().rank_of(device), remembered: the rendezvous asks for the two devices of every tensor
  // it moves, and parsing a name and scanning the tasks each time cost microseconds per step (and
  // grows with the task count). Thread-safe; -1 answers and names beyond kRankMemoSize are not
  // kept, so a peer sending made-up names cannot grow it without bound.
  int rank_of_device(std::string_view device) const;
  std::string task_name(int rank) const { return spec_.task(rank).name(); }
  ControlChannel& channel() { return channel_; }
  MpiRendezvous& rendezvous() { return *rendezvous_; }

  // Every task's devices, gathered by init (on the chief; this task's elsewhere).
  std::vector<DeviceInfo> devices;

  // Chief: the cluster as a Session's compiler sees it, for a new session id.
  std::unique_ptr<RemoteTasks> session_tasks();
  // Chief: this process's CPU by its cluster name, where feeds and fetches live.
  std::string host_device() const;
  // Chief: placement candidates, every device of every task.
  std::vector<PlacementDevice> placement_devices() const;
  // Chief: every task, this one included, resets its collectives together
  // (CollectiveExecutor::reset: after a failed data-parallel step, the groups work again). Waits
  // for every answer, bounded by liveness; the first error (Unavailable when a task did not take
  // part within kCollectivesResetTimeout) is thrown.
  void reset_collectives();
  // Chief: tells every task to exit and waits (bounded) for them to say so. Idempotent.
  void shut_down_tasks();

  // Chief: turns timeline recording on or off on every other task and, with `collect`, takes the
  // events each recorded out of it. Stopping with `collect`, returns them shifted onto this
  // process's clock (the task's offset estimated as its clock on receipt minus the midpoint of the
  // request's send and its answer's arrival, from the shortest of a few round trips); starting,
  // discards them and returns nothing.
  // Bounded: a task that does not answer within `timeout` is DeadlineExceeded naming it; a lost
  // task is Unavailable naming it.
  std::vector<TaskTimeline> timeline_control(bool enable, bool collect, std::chrono::milliseconds timeout);

  // Chief: gathers every live task's flight recorder (runtime/flight_recorder.h) with this
  // process's, moved onto this process's clock, and writes them as one file
  // (cluster/flight_record.h) in WEFT_FLIGHT_RECORDER_DIR (the temporary directory when unset),
  // printing "weft: flight record of step N written to PATH". `step_id` -1: no step (a task was
  // lost between steps). At most once per step and kMaxFlightRecordFiles per process; a task
  // that does not answer within kFlightRecordWait (or is lost) is named in the file, not waited
  // for. Returns the file's path, or empty when nothing was written (already written for this
  // step, over the limit, recording off, or the write failed: said on stderr).
  std::string write_flight_record(int64_t step_id, const std::string& reason);
  // The same, later, on a thread of its own (from the liveness thread, which must not wait).
  void write_flight_record_soon(int64_t step_id, std::string reason);
  static constexpr int kMaxFlightRecordFiles = 16;
  static constexpr std::chrono::milliseconds kFlightRecordWait{3000};

  // Chief only, for the session and graph objects below.
  class SessionTasks;
  class Graph;
  // Who waits for replies of one (kind, id): the ranks still to answer, and the first error.
  struct Waiter {
    std::set<int> pending;
    std::exception_ptr error;
    CancellationManager* cancel = nullptr;  // steps: cancelled with the first error
    // Cancellations of `cancel` running outside the runtime's lock: wait_for does not return (and
    // the step does not end and destroy `cancel`) before they have.
    int cancelling = 0;
    int64_t step_id = -1;                   // steps: which, for the deadline's message
    std::string what;                       // not a step: what is awaited, for the deadline's message
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::chrono::milliseconds timeout{0};
    // Steps: the stall limits (cluster/stall_report.h), and the report gathered once past the warning.
    std::chrono::steady_clock::time_point started;
    std::chrono::milliseconds stall_warning{0}, stall_timeout{0};
    enum class Stall { kNone, kAsked, kPrinted } stall = Stall::kNone;
    std::chrono::steady_clock::time_point stall_report_due;
    std::map<int, TaskStallReport> stall_reports;  // by rank, as the tasks answer
    std::string stall_report;                      // composed: printed, and carried by the timeout's error
    Executor::RunningStep* local = nullptr;        // this process's part, while wait_for drives it
    // Called (under the runtime's lock, so briefly) with each awaited answer and the time it came
    // (timeline::now_us()), for requests whose answers carry more than an error.
    std::function<void(int rank, ControlReply& reply, int64_t received_us)> on_answer;
  };
  void send_request(int rank, const std::function<void(capnp::MessageBuilder&)>& build);
  // Waits until every rank `w` waits for has answered, or a task is lost (bounded by liveness);
  // forgets the waiter (registered under `key`) and returns its error, or the loss, or null. With
  // `local`, this process's part of a step, runs it meanwhile to its end.
  std::exception_ptr wait_for(Waiter& w, std::pair<int, uint64_t> key, Executor::RunningStep* local = nullptr);
  // A waiter's step cancelled with `error`; under the lock, counted in Waiter::cancelling.
  struct PendingCancel {
    Waiter* waiter;
    std::exception_ptr error;
  };
  // Runs them outside the lock (cancelling tells the other tasks to abort, through this runtime).
  void cancel_steps(const std::vector<PendingCancel>& cancels);

  // Whether a task was declared lost: the job cannot go on, and MPI_Finalize would wait for it.
  bool lost() {
    std::lock_guard lock(mu_);
    return lost_ != nullptr;
  }

  std::chrono::milliseconds liveness_timeout{10000};
  // The step tree's fan-out (cluster/step_tree.h), from WEFT_STEP_FANOUT.
  int step_fan_out = 8;
  // Chief: the RunStep messages it has sent itself (the tree's first level), for tests and
  // docs/scale.md's measurements.
  std::atomic<uint64_t> step_messages_sent{0};

 private:
  // The chief's liveness thread: pings every task each kPingInterval, declares silent ones lost,
  // and ends waits past their deadlines.
  void watch_liveness();
  // A reply, on the engine's driving thread: handed to whoever waits for it.
  void on_reply_message(ControlChannel::Message message);
  void on_reply(int source, const ControlChannel::Message& message, int64_t received_us);
  // One task's answer (`reply` only for answers that carry more than an error).
  void on_answer(int kind, uint64_t id, int rank, const std::exception_ptr& error, ControlReply* reply, int64_t received_us);
  void declare_lost(int rank);
  void check_deadlines(std::chrono::steady_clock::time_point now);
  // Steps past their stall warning: asks the tasks still in them for a report, then prints it.
  void check_stalls(std::chrono::steady_clock::time_point now);
  // The report of a step's waiter (under mu_): its tasks' parts so far, and this process's.
  std::string compose_stall_report_locked(const Waiter& w, std::chrono::steady_clock::time_point now);

  ClusterSpec spec_;
  int rank_;
  MPI_Comm control_, data_;
  ControlChannel channel_;
  std::unique_ptr<MpiRendezvous> rendezvous_;

  // Chief only.
  std::mutex reset_mu_;  // one reset of the collectives at a time: its answers carry no id
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, uint64_t>, Waiter*> waiters_;  // (kind, id) -> who waits
  std::vector<std::chrono::steady_clock::time_point> last_heard_;  // per rank
  std::exception_ptr lost_;  // set once a task is lost: every later wait fails with it
  uint64_t next_session_ = 1, next_handle_ = 1, next_timeline_id_ = 1;
  int64_t next_step_ = 1;
  bool stopping_ = false, shut_down_ = false;
  static constexpr size_t kRankMemoSize = 4096;
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex rank_memo_mu_;
  mutable std::unordered_map<std::string, int, NameHash, std::equal_to<>> rank_memo_;

  std::condition_variable watch_cv_;  // wakes the liveness thread to stop
  std::thread watcher_;

  // Chief: flight records (cluster/cluster_flight_record.cpp).
  int lost_rank_ = -1;            // guarded by mu_: the task declared lost
  bool lost_recorded_ = false;    // guarded by mu_: a step failed by the loss has had its record
  // Whether a step that failed with `error` gets a flight record: not for the program's own
  // mistakes (InvalidArgument, NotFound, OutOfRange, Unimplemented), and once for a lost task.
  bool flight_record_wanted(const std::exception_ptr& error);
  uint64_t next_flight_id_ = 1;   // guarded by mu_
  std::mutex flight_mu_;          // one flight record written at a time; guards what follows
  std::set<int64_t> flight_steps_;  // steps a record was written for
  int flight_files_ = 0;          // records tried (each may write a file)
  bool flight_limit_said_ = false;
  std::deque<std::pair<int64_t, std::string>> flight_queue_;  // guarded by mu_: for flight_writer_
  std::thread flight_writer_;     // started by the first write_flight_record_soon (under mu_)
  void write_queued_flight_records();
};

}  // namespace weft
