#include "cluster/cluster_runtime.h"

#include <cstdlib>
#include <iostream>

#include "runtime/duration_setting.h"
#include "cluster/job_signals.h"
#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "cluster/step_tree.h"
#include "comm/collective_executor.h"
#include "comm/nccl/nccl_p2p.h"
#include "runtime/cancellation.h"
#include "runtime/device.h"
#include "runtime/graph_format.h"
#include "scheduler/passes/partition.h"

namespace weft {

namespace {

// The first line of an error's message, at most 500 bytes: a flight record's reason.
std::string first_line(const std::exception_ptr& error) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  return what.substr(0, std::min<size_t>(what.find('\n'), 500));
}

// Whether a step's error is worth a flight record: not the program's own mistakes (a bad
// argument, an index out of range, a missing file or kernel), which name their node and user line
// already and say nothing about transfers; everything else (deadlines and stalls, lost tasks, MPI
// failures, interrupted collectives, internal errors) may.
bool worth_a_flight_record(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    switch (e.code()) {
      case ErrorCode::kInvalidArgument:
      case ErrorCode::kNotFound:
      case ErrorCode::kOutOfRange:
      case ErrorCode::kUnimplemented:
        return false;
      default:
        return true;
    }
  } catch (...) {
    return true;
  }
}

}  // namespace

std::chrono::milliseconds liveness_timeout_from(const char* text) {
  const std::chrono::milliseconds t =
      milliseconds_setting("WEFT_LIVENESS_TIMEOUT_MS", text, std::chrono::milliseconds(10000));
  if (t >= kMinLivenessTimeout) return t;
  std::cerr << "weft: [cluster] WEFT_LIVENESS_TIMEOUT_MS=" << t.count() << " is shorter than the shortest liveness timeout, "
            << kMinLivenessTimeout.count() << " ms (the chief pings every " << kPingInterval.count() << " ms); using "
            << kMinLivenessTimeout.count() << "\n";
  return kMinLivenessTimeout;
}

ClusterRuntime::ClusterRuntime(ClusterSpec spec, int rank, MPI_Comm control, MPI_Comm data)
    : spec_(std::move(spec)), rank_(rank), control_(control), data_(data), channel_(control) {
  MpiRendezvousOptions rendezvous_options;
  rendezvous_options.device_payloads = make_nccl_payloads();  // GPU to GPU between tasks, where there are GPUs
  rendezvous_ = std::make_unique<MpiRendezvous>(data_, [this](std::string_view device) { return rank_of_device(device); },
                                                std::move(rendezvous_options));
  liveness_timeout = liveness_timeout_from(std::getenv("WEFT_LIVENESS_TIMEOUT_MS"));
  step_fan_out = step_fan_out_from(std::getenv("WEFT_STEP_FANOUT"));
  if (rank_ == spec_.chief_rank()) {
    last_heard_.assign(static_cast<size_t>(spec_.num_tasks()), std::chrono::steady_clock::now());
    channel_.listen(kReplyTag, MPI_ANY_SOURCE, [this](ControlChannel::Message m) { on_reply_message(std::move(m)); });
    watcher_ = std::thread([this] { watch_liveness(); });
  }
}

ClusterRuntime::~ClusterRuntime() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  cv_.notify_all();  // the flight record writer
  if (watcher_.joinable()) watcher_.join();
  if (flight_writer_.joinable()) flight_writer_.join();
  channel_.stop_listening(kReplyTag);
  rendezvous_.reset();
}

std::string ClusterRuntime::host_device() const { return task_name(rank_) + "/device:CPU:0"; }

std::vector<PlacementDevice> ClusterRuntime::placement_devices() const {
  std::vector<PlacementDevice> out;
  for (const DeviceInfo& d : devices) out.push_back(placement_device(d));
  return out;
}

void ClusterRuntime::send_request(int rank, const std::function<void(capnp::MessageBuilder&)>& build) {
  capnp::MallocMessageBuilder message;
  build(message);
  channel_.send(rank, kRequestTag, message);
}

int ClusterRuntime::rank_of_device(std::string_view device) const {
  {
    std::shared_lock lock(rank_memo_mu_);
    if (auto it = rank_memo_.find(device); it != rank_memo_.end()) return it->second;
  }
  const int rank = spec_.rank_of(device);
  if (rank >= 0) {
    std::unique_lock lock(rank_memo_mu_);
    if (rank_memo_.size() < kRankMemoSize) rank_memo_.emplace(std::string(device), rank);
  }
  return rank;
}

std::exception_ptr ClusterRuntime::wait_for(Waiter& w, std::pair<int, uint64_t> key, Executor::RunningStep* local) {
  auto answered = [&] { return (w.pending.empty() || lost_) && w.cancelling == 0; };
  // Answers usually come within microseconds: this thread drives the progress engine while it
  // waits, so the answers (and the local part's Recvs and collectives) complete here and are not
  // handed over from another thread (a wake-up on the critical path of every step); between
  // rounds it runs what of the local part is ready. The liveness thread bounds the wait (lost
  // tasks, deadlines), and a lost task cancels the local part.
  bool local_over = local == nullptr;
  {
    std::lock_guard lock(mu_);
    w.local = local;  // for stall reports, until the waiter is forgotten below
  }
  MpiProgressEngine& engine = channel_.engine();
  if (local) local->wake_with([&engine] { engine.wake(); });
  engine.drive_until(
      [&] {
        if (!local_over) local_over = local->run_ready();
        std::lock_guard lock(mu_);
        return local_over && answered();
      },
      std::chrono::steady_clock::time_point::max());
  std::unique_lock lock(mu_);
  cv_.wait(lock, answered);  // the engine was shut down under this wait: cancellations still end it
  waiters_.erase(key);
  if (w.error) return w.error;
  return w.pending.empty() ? nullptr : lost_;
}

void ClusterRuntime::watch_liveness() {
  // Deadlines are seen within this tick; pings go out every kPingInterval.
  constexpr auto kTick = std::chrono::milliseconds(10);
  auto next_ping = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    check_stalls(now);
    check_deadlines(now);
    if (now >= next_ping) {
      next_ping = now + kPingInterval;
      for (int r = 0; r < spec_.num_tasks(); ++r) {
        if (r == rank_) continue;
        send_request(r, [](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setPing(); });
        bool silent;
        {
          std::lock_guard guard(mu_);
          silent = !shut_down_ && now - last_heard_[static_cast<size_t>(r)] > liveness_timeout;
        }
        if (silent) declare_lost(r);
      }
    }
    lock.lock();
    watch_cv_.wait_for(lock, kTick, [&] { return stopping_; });
  }
}

void ClusterRuntime::on_reply_message(ControlChannel::Message m) {
  try {
    if (!m.error.empty()) throw InvalidArgument(m.error);
    on_reply(m.source, m, timeline::now_us());
  } catch (const std::exception& e) {
    // A damaged reply: the task that sent it is broken, which is as good as lost.
    std::cerr << "weft: " << e.what() << "\n";
    if (m.source >= 0) declare_lost(m.source);
  }
}

void ClusterRuntime::on_reply(int source, const ControlChannel::Message& message, int64_t received_us) {
  if (source <= 0 || source >= spec_.num_tasks())
    throw InvalidArgument("[cluster] reply from rank " + std::to_string(source) + ", which is not a task");
  ControlReply reply = decode_reply(message.words(), task_name(source));
  if (reply.kind == proto::Reply::Kind::SIGNAL) {  // unasked: the job ends (cluster/job_signals.h)
    job_signals::report(task_name(source), reply.signal);
    return;
  }
  const int kind = static_cast<int>(reply.kind);
  if (reply.kind == proto::Reply::Kind::STALL_REPORT) {
    std::lock_guard lock(mu_);
    last_heard_[static_cast<size_t>(source)] = std::chrono::steady_clock::now();
    auto it = waiters_.find({static_cast<int>(proto::Reply::Kind::RUN_STEP), reply.handle});
    if (it != waiters_.end()) it->second->stall_reports[source] = {std::move(reply.report), reply.in_collective};
    return;
  }
  if (reply.kind != proto::Reply::Kind::RUN_STEP) {
    on_answer(kind, reply.handle, source, reply.error, &reply, received_us);
    return;
  }
  // A step's answer carries those of the sender's subtree in the step's tree (cluster/step_tree.h).
  const auto id = static_cast<uint64_t>(reply.step_id);
  for (StepAnswer& a : step_answers(source, std::move(reply))) {
    if (a.rank <= 0 || a.rank >= spec_.num_tasks())
      throw InvalidArgument("[cluster] " + task_name(source) + " answered for rank " + std::to_string(a.rank) +
                            ", which is not a task");
    // The step's small sends to this process came with its answer: delivered before the answer
    // counts, so the step's Recvs have them when the step is seen as done (scheduler/step_rendezvous.h).
    if (!a.error) {
      try {
        for (StepTensor& t : a.tensors) rendezvous_->deliver_from_peer(a.rank, t.key, std::move(t.value), t.is_dead);
      } catch (...) {
        a.error = error_at_task(std::current_exception(), task_name(a.rank));
      }
    }
    on_answer(kind, id, a.rank, a.error, nullptr, received_us);
  }
}

void ClusterRuntime::on_answer(int kind, uint64_t id, int rank, const std::exception_ptr& error, ControlReply* reply,
                               int64_t received_us) {
  std::vector<PendingCancel> cancels;
  {
    std::lock_guard lock(mu_);
    last_heard_[static_cast<size_t>(rank)] = std::chrono::steady_clock::now();
    auto it = waiters_.find({kind, id});
    if (it == waiters_.end()) return;  // a ping, or an answer nobody waits for any more
    Waiter& w = *it->second;
    if (!w.pending.erase(rank)) return;  // a second answer from the same task: ignored
    if (w.on_answer && reply && !error) w.on_answer(rank, *reply, received_us);
    if (error && !w.error) {
      w.error = error;
      // The other tasks' parts are aborted now and answer within moments; one whose kernel does
      // not return is not waited for past the reclaim grace (scheduler/stall_watchdog.h).
      const auto stragglers_by = std::chrono::steady_clock::now() + stall_reclaim_grace();
      if (stragglers_by < w.deadline) {
        w.deadline = stragglers_by;
        w.timeout = stall_reclaim_grace();
      }
      if (w.cancel) {
        ++w.cancelling;
        cancels.push_back({&w, error});
      }
    }
    if (w.pending.empty()) cv_.notify_all();
  }
  cancel_steps(cancels);
}

void ClusterRuntime::cancel_steps(const std::vector<PendingCancel>& cancels) {
  for (const PendingCancel& c : cancels) {
    c.waiter->cancel->cancel(c.error);
    std::lock_guard lock(mu_);
    --c.waiter->cancelling;
    cv_.notify_all();
  }
}

void ClusterRuntime::check_deadlines(std::chrono::steady_clock::time_point now) {
  std::vector<PendingCancel> expired;
  bool released = false;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, w] : waiters_) {
      if (now < w->deadline || w->pending.empty()) continue;
      std::string running;
      for (int r : w->pending) running += (running.empty() ? "" : ", ") + task_name(r);
      const std::string what = w->what.empty() ? "step " + std::to_string(w->step_id) : w->what;
      if (w->error) {
        // Failed already: the tasks still in it did not stop within the reclaim grace.
        std::cerr << "weft: [cluster] " + what + " failed, and " + running + " had not stopped " +
                         stall_seconds(w->timeout) + " later (a kernel that does not return?); going on without it\n"
                  << std::flush;
        w->pending.clear();
        w->deadline = std::chrono::steady_clock::time_point::max();
        released = true;
        continue;
      }
      const bool stalled = w->stall_timeout.count() > 0 && w->timeout == w->stall_timeout;
      std::exception_ptr e;
      if (stalled) {
        if (w->stall_report.empty()) w->stall_report = compose_stall_report_locked(*w, now);
        e = std::make_exception_ptr(DeadlineExceeded("[cluster] " + what + " stalled: it ran past its stall timeout of " +
                                                     std::to_string(w->stall_timeout.count()) +
                                                     " ms (stall_timeout_ms) and was ended; still running: " + running +
                                                     "\n  " + w->stall_report));
      } else {
        e = std::make_exception_ptr(DeadlineExceeded(
            "[cluster] " + what + " passed its deadline of " + std::to_string(w->timeout.count()) + " ms; " +
            (w->what.empty() ? "still running: " : "no answer from: ") + running));
      }
      if (!w->error) w->error = e;
      w->pending.clear();  // their answers, if they come, are for nobody now
      w->deadline = std::chrono::steady_clock::time_point::max();
      if (w->cancel) {
        ++w->cancelling;
        expired.push_back({w, w->error});
      }
    }
    if (!expired.empty() || released) cv_.notify_all();
  }
  if (released) channel_.engine().wake();  // a driver waiting for the step's answers looks again
  cancel_steps(expired);
}

void ClusterRuntime::check_stalls(std::chrono::steady_clock::time_point now) {
  // How long the tasks have to answer a report's request before it is printed without them.
  constexpr auto kReportWait = std::chrono::milliseconds(1000);
  std::vector<std::pair<int, int64_t>> ask;  // (rank, step)
  std::vector<std::string> print;
  std::vector<int64_t> record;  // steps whose flight record is written with their report
  {
    std::lock_guard lock(mu_);
    for (auto& [key, w] : waiters_) {
      if (w->stall_warning.count() == 0 || w->pending.empty() || w->error) continue;
      if (w->stall == Waiter::Stall::kNone && now - w->started >= w->stall_warning) {
        w->stall = Waiter::Stall::kAsked;
        w->stall_report_due = now + kReportWait;
        for (int r : w->pending) ask.push_back({r, w->step_id});
      } else if (w->stall == Waiter::Stall::kAsked) {
        bool all = true;
        for (int r : w->pending) all = all && w->stall_reports.contains(r);
        if (!all && now < w->stall_report_due) continue;
        w->stall = Waiter::Stall::kPrinted;
        w->stall_report = compose_stall_report_locked(*w, now);
        print.push_back(w->stall_report);
        record.push_back(w->step_id);
      }
    }
  }
  for (const auto& [rank, step] : ask)
    send_request(rank, [step = step](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setStallReport(step); });
  for (const std::string& report : print) std::cerr << "weft: [cluster] " + report << std::flush;
  for (int64_t step : record) write_flight_record_soon(step, "stall warning: the step ran past its stall warning");
}

std::string ClusterRuntime::compose_stall_report_locked(const Waiter& w, std::chrono::steady_clock::time_point now) {
  std::map<std::string, TaskStallReport> tasks;
  std::vector<std::string> silent;
  const Executor::RunningStep* local[] = {w.local};
  tasks[task_name(rank_)] = describe_stalled_task(w.local ? std::span(local) : std::span<const Executor::RunningStep* const>(),
                                                  channel_.engine());
  for (int r : w.pending) {
    if (auto it = w.stall_reports.find(r); it != w.stall_reports.end()) tasks[task_name(r)] = it->second;
    else silent.push_back(task_name(r));
  }
  return compose_stall_report(w.step_id, std::chrono::duration_cast<std::chrono::milliseconds>(now - w.started),
                              w.stall_warning, w.stall_timeout, tasks, silent);
}

void ClusterRuntime::declare_lost(int rank) {
  std::vector<PendingCancel> cancels;
  {
    std::lock_guard lock(mu_);
    if (lost_) return;
    lost_rank_ = rank;
    lost_ = std::make_exception_ptr(Unavailable(
        "[cluster] task " + task_name(rank) + " (rank " + std::to_string(rank) + ") is lost: it has not answered for " +
        std::to_string(liveness_timeout.count()) + " ms (killed, crashed or out of memory?)"));
    for (auto& [key, w] : waiters_) {
      if (!w->error) w->error = lost_;
      if (w->cancel) {
        ++w->cancelling;
        cancels.push_back({w, lost_});
      }
    }
    cv_.notify_all();
  }
  cancel_steps(cancels);
  // A step that waited for the task writes its record as it fails (finish_step); between steps
  // the loss is recorded here.
  if (cancels.empty()) write_flight_record_soon(-1, "task " + task_name(rank) + " is lost (between steps)");
}

bool ClusterRuntime::flight_record_wanted(const std::exception_ptr& error) {
  if (!worth_a_flight_record(error)) return false;
  std::lock_guard lock(mu_);
  if (!lost_ || error != lost_) return true;
  // After a loss every step fails with it at once: the first one's record is the one that says
  // something.
  return !std::exchange(lost_recorded_, true);
}

void ClusterRuntime::reset_collectives() {
  if (rank_ != spec_.chief_rank()) throw FailedPrecondition("[cluster] reset_collectives is the chief's to call");
  std::lock_guard serial(reset_mu_);
  Waiter w;
  for (int r = 0; r < spec_.num_tasks(); ++r)
    if (r != rank_) w.pending.insert(r);
  const auto key = std::make_pair(static_cast<int>(proto::Reply::Kind::RESET_COLLECTIVES), uint64_t{0});
  {
    std::lock_guard lock(mu_);
    if (lost_) std::rethrow_exception(lost_);
    waiters_[key] = &w;
  }
  for (int r : std::set<int>(w.pending))
    send_request(r, [](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setResetCollectives(); });
  std::exception_ptr local;
  try {
    process_collectives().reset(kCollectivesResetTimeout);  // meanwhile, with the tasks
  } catch (...) {
    local = std::current_exception();
  }
  std::exception_ptr remote = wait_for(w, key);
  if (local) std::rethrow_exception(local);
  if (remote) std::rethrow_exception(remote);
}

void ClusterRuntime::shut_down_tasks() {
  {
    std::lock_guard lock(mu_);
    if (shut_down_ || rank_ != spec_.chief_rank()) return;
    shut_down_ = true;
  }
  for (int r = 0; r < spec_.num_tasks(); ++r)
    if (r != rank_) send_request(r, [](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setShutdown(); });
  channel_.flush(std::chrono::seconds(5));  // bounded: a lost task never takes its message
}

// The partitions of one graph on the other tasks: one handle per task.
class ClusterRuntime::Graph final : public RemoteGraph {
 public:
  Graph(ClusterRuntime& rt, std::vector<std::pair<int, uint64_t>> handles)
      : rt_(rt), handles_(std::move(handles)), tree_(ranks_of(handles_), rt.step_fan_out) {}
  ~Graph() override {
    for (const auto& [rank, handle] : handles_)
      rt_.send_request(rank, [handle = handle](capnp::MessageBuilder& b) {
        b.initRoot<proto::Request>().initRelease().setHandle(handle);
      });
  }

  void start_step(int64_t step_id, CancellationManager& cancel, const StepLimits& limits,
                  std::vector<StepTensor> tensors) override {
    auto w = std::make_unique<Waiter>();
    for (const auto& [rank, handle] : handles_) w->pending.insert(rank);
    w->cancel = &cancel;
    w->step_id = step_id;
    w->started = std::chrono::steady_clock::now();
    w->stall_warning = limits.stall_warning;
    w->stall_timeout = limits.stall_timeout;
    // The step ends at the nearer of its deadline and its stall timeout.
    for (std::chrono::milliseconds limit : {limits.timeout, limits.stall_timeout})
      if (limit.count() > 0 && w->started + limit < w->deadline) {
        w->timeout = limit;
        w->deadline = w->started + limit;
      }
    std::exception_ptr lost;
    {
      std::lock_guard lock(rt_.mu_);
      lost = rt_.lost_;
      if (lost) {
        w->error = lost;
        w->pending.clear();
      } else {
        rt_.waiters_[{static_cast<int>(proto::Reply::Kind::RUN_STEP), static_cast<uint64_t>(step_id)}] = w.get();
      }
    }
    {
      std::lock_guard lock(mu_);
      steps_[step_id] = std::move(w);
      if (lost) tokens_[step_id] = {&cancel, kNoCancellationToken};
    }
    if (lost) {
      cancel.cancel(lost);  // a lost task: the step cannot run
      return;
    }
    std::map<int, std::vector<StepTensor>> tensors_of;
    for (StepTensor& t : tensors) tensors_of[rt_.rank_of_device(t.key.dst_device)].push_back(std::move(t));
    // Down the step's tree: the chief sends to a few tasks, which forward it (cluster/step_tree.h).
    const uint64_t handle = handles_.empty() ? 0 : handles_.front().second;
    for (const ForwardedStep& child : tree_.forwarded(tensors_of)) {
      rt_.send_request(child.rank, [&](capnp::MessageBuilder& b) {
        write_run_step(handle, step_id, child, b.initRoot<proto::Request>().initRunStep());
      });
      rt_.step_messages_sent.fetch_add(1, std::memory_order_relaxed);
    }
    // Whoever fails first (this task, another, the liveness check) makes every task stop: the
    // abort goes to every task at once, not down the tree.
    const CancellationToken token = cancel.register_callback([this, step_id](const std::exception_ptr& e) {
      for (const auto& [rank, handle] : handles_)
        rt_.send_request(rank, [step_id, &e](capnp::MessageBuilder& b) {
          auto abort = b.initRoot<proto::Request>().initAbortStep();
          abort.setStepId(step_id);
          error_to_proto(e, abort.initError());
        });
    });
    std::lock_guard lock(mu_);
    tokens_[step_id] = {&cancel, token};
  }

  void finish_step(int64_t step_id, Executor::RunningStep* local) override {
    std::unique_ptr<Waiter> w;
    std::pair<CancellationManager*, CancellationToken> token;
    {
      std::lock_guard lock(mu_);
      w = std::move(steps_.at(step_id));
      steps_.erase(step_id);
      token = tokens_.at(step_id);
      tokens_.erase(step_id);
    }
    const std::exception_ptr error =
        rt_.wait_for(*w, {static_cast<int>(proto::Reply::Kind::RUN_STEP), static_cast<uint64_t>(step_id)}, local);
    if (token.second != kNoCancellationToken) token.first->deregister_callback(token.second);
    if (error) {
      // Before the error reaches the user: their program may end at once.
      if (rt_.flight_record_wanted(error)) rt_.write_flight_record(step_id, "error: " + first_line(error));
      std::rethrow_exception(error);
    }
  }

 private:
  static std::vector<int> ranks_of(const std::vector<std::pair<int, uint64_t>>& handles) {
    std::vector<int> ranks;
    for (const auto& [rank, handle] : handles) ranks.push_back(rank);
    return ranks;
  }

  ClusterRuntime& rt_;
  std::vector<std::pair<int, uint64_t>> handles_;  // (rank, handle): one handle, the same on every task
  StepTree tree_;
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<Waiter>> steps_;
  std::map<int64_t, std::pair<CancellationManager*, CancellationToken>> tokens_;
};

// One Session's view of the cluster: its own session id, so the tasks keep its variables apart.
class ClusterRuntime::SessionTasks final : public RemoteTasks {
 public:
  SessionTasks(ClusterRuntime& rt, uint64_t session) : rt_(rt), session_(session) {}
  ~SessionTasks() override {
    for (int r = 0; r < rt_.spec_.num_tasks(); ++r)
      if (r != rt_.rank_)
        rt_.send_request(r, [this](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setEndSession(session_); });
  }

  bool is_local(std::string_view device) const override { return rt_.rank_of_device(device) == rt_.rank_; }
  Rendezvous& rendezvous() override { return rt_.rendezvous(); }
  int64_t next_step_id() override {
    std::lock_guard lock(rt_.mu_);
    return rt_.next_step_++;
  }

  std::unique_ptr<RemoteGraph> register_partitions(std::vector<Partition> partitions,
                                                   std::vector<std::string> reply_edges) override {
    std::map<int, std::vector<std::string>> by_rank;
    for (const Partition& p : partitions) {
      const int rank = rt_.rank_of_device(p.device);
      if (rank < 0 || rank == rt_.rank_)
        throw Internal("[cluster] partition for device '" + p.device + "', which no other task has");
      by_rank[rank].push_back(encode_graph(p.graph));
    }
    uint64_t handle;
    {
      std::lock_guard lock(rt_.mu_);
      handle = rt_.next_handle_++;
    }
    std::vector<int> ranks;
    for (const auto& [rank, graphs] : by_rank) ranks.push_back(rank);
    // One request per task, each with its own partitions: built per rank below.
    Waiter w;
    w.pending.insert(ranks.begin(), ranks.end());
    const auto key = std::make_pair(static_cast<int>(proto::Reply::Kind::REGISTER), handle);
    {
      std::lock_guard lock(rt_.mu_);
      if (rt_.lost_) std::rethrow_exception(rt_.lost_);
      rt_.waiters_[key] = &w;
    }
    for (const auto& [rank, graphs] : by_rank)
      rt_.send_request(rank, [&, rank = rank](capnp::MessageBuilder& b) {
        auto reg = b.initRoot<proto::Request>().initRegister();
        reg.setSession(session_);
        reg.setHandle(handle);
        auto edges = reg.initReplyEdges(static_cast<unsigned>(reply_edges.size()));
        for (size_t i = 0; i < reply_edges.size(); ++i) edges.set(static_cast<unsigned>(i), reply_edges[i]);
        auto list = reg.initPartitions(static_cast<unsigned>(by_rank[rank].size()));
        for (size_t i = 0; i < by_rank[rank].size(); ++i) {
          const std::string& bytes = by_rank[rank][i];
          list.set(static_cast<unsigned>(i),
                   capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
        }
      });
    if (std::exception_ptr error = rt_.wait_for(w, key)) std::rethrow_exception(error);
    std::vector<std::pair<int, uint64_t>> handles;
    for (int r : ranks) handles.push_back({r, handle});
    return std::make_unique<Graph>(rt_, std::move(handles));
  }

 private:
  ClusterRuntime& rt_;
  uint64_t session_;
};

std::unique_ptr<RemoteTasks> ClusterRuntime::session_tasks() {
  std::lock_guard lock(mu_);
  return std::make_unique<SessionTasks>(*this, next_session_++);
}

}  // namespace weft
