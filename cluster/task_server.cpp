#include "cluster/task_server.h"

#include <chrono>
#include <iostream>
#include <optional>

#include "cluster/job_signals.h"
#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "cluster/stall_report.h"
#include "runtime/flight_recorder.h"
#include "comm/collective_executor.h"
#include "comm/step_collectives.h"
#include "runtime/graph_format.h"
#include "runtime/timeline.h"
#include "runtime/timeline_format.h"

namespace weft {

namespace {

using Store = std::map<std::string, std::shared_ptr<VariableState>, std::less<>>;

// Points the graph's variables (and its subgraphs') at the session's: every graph of a session
// reads and updates the same state, as one process's graphs share their VariableStates.
void share_variables(GraphIR& g, Store& store) {
  for (auto& [name, state] : g.variables) {
    std::shared_ptr<VariableState>& shared = store[name];
    if (!shared) shared = std::make_shared<VariableState>(*state);
    state = shared;
  }
  for (int32_t id : g.node_ids()) {
    Node& n = g.node(id);
    std::vector<std::pair<std::string, GraphAttr>> rewritten;
    for (const auto& [key, value] : n.attrs)
      if (const GraphAttr* sub = std::get_if<GraphAttr>(&value); sub && *sub) {
        auto copy = std::make_shared<GraphIR>(**sub);
        share_variables(*copy, store);
        rewritten.emplace_back(key, std::move(copy));
      }
    for (auto& [key, sub] : rewritten) n.attrs.set(key, GraphAttr(std::move(sub)));
  }
}

}  // namespace

TaskServer::TaskServer(ClusterRuntime& runtime)
    : rt_(runtime), task_(runtime.task_name(runtime.rank())), stall_owner_("task " + task_) {
  heard_from_chief_ = std::chrono::steady_clock::now().time_since_epoch().count();
  // From anyone: a step may come down its tree from another task (on_request checks what).
  rt_.channel().listen(kRequestTag, MPI_ANY_SOURCE,
                       [this](ControlChannel::Message m) { on_request(std::move(m)); });
}

TaskServer::~TaskServer() {
  rt_.channel().stop_listening(kRequestTag);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [step, running] : running_)
      running->cancel.cancel(std::make_exception_ptr(Unavailable("[task " + task_ + "] shutting down")));
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TaskServer::reply(const std::function<void(capnp::MessageBuilder&)>& build) {
  capnp::MallocMessageBuilder message;
  build(message);
  rt_.channel().send(rt_.spec().chief_rank(), kReplyTag, message);
}

void TaskServer::post(std::function<void()> work) {
  std::lock_guard lock(mu_);
  work_.push_back(std::move(work));
  if (idle_ > 0) {
    work_cv_.notify_one();
    return;
  }
  threads_.emplace_back([this] {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      work_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      --idle_;
      if (work_.empty()) return;  // stopping
      std::function<void()> next = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      next();
      lock.lock();
    }
  });
}

void TaskServer::serve() {
  std::thread standby([this] { stand_by(); });
  MpiProgressEngine& engine = rt_.channel().engine();
  std::unique_lock lock(queue_mu_);
  while (!shutdown_requested_) {
    if (queue_.empty() || standby_busy_) {
      lock.unlock();
      // Waiting for the next request: this thread drives the engine meanwhile, so the request is
      // read here and handled without a wake-up between.
      engine.drive_until(
          [&] {
            std::lock_guard guard(queue_mu_);
            return shutdown_requested_ || (!queue_.empty() && !standby_busy_);
          },
          std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
      lock.lock();
      continue;
    }
    ControlRequest request = std::move(queue_.front());
    queue_.pop_front();
    if (request.kind != ControlRequest::Kind::kRunStep) {
      lock.unlock();
      handle(request);
      lock.lock();
      continue;
    }
    serve_in_step_ = true;  // the standby thread serves until the step ends
    const bool waiting = !queue_.empty();
    lock.unlock();
    if (waiting) queue_cv_.notify_all();  // (a wake-up per step, when nothing waits, cost microseconds)
    start_step(request, /*on_serve_thread=*/true);
    lock.lock();
    serve_in_step_ = false;
  }
  lock.unlock();
  queue_cv_.notify_all();
  standby.join();
}

void TaskServer::on_request(ControlChannel::Message m) {
  if (!m.error.empty()) {
    // A request that cannot be read is the chief's bug or damage on the way: say so, go on.
    std::cerr << "weft: [task " << task_ << "] " << m.error << "\n";
    return;
  }
  const bool from_chief = m.source == rt_.spec().chief_rank();
  if (from_chief) heard_from_chief_ = std::chrono::steady_clock::now().time_since_epoch().count();
  try {
    ControlRequest request = decode_request(m.words(), from_chief ? std::string("the chief") : rt_.task_name(m.source));
    if (!from_chief && request.kind != ControlRequest::Kind::kRunStep && request.kind != ControlRequest::Kind::kStepDone)
      throw InvalidArgument("[cluster] " + rt_.task_name(m.source) + " sent a request only the chief may send");
    switch (request.kind) {
      case ControlRequest::Kind::kPing:
        reply([](capnp::MessageBuilder& b) { b.initRoot<proto::Reply>().setKind(proto::Reply::Kind::PING); });
        return;
      case ControlRequest::Kind::kAbortStep:
        abort_step(request.step_id, request.error);
        return;
      case ControlRequest::Kind::kShutdown: {
        shutdown_requested_ = true;
        // A step still running now (its kernel outlived the step's abort) would hold this task's
        // exit, and with it the job's: it gets the reclaim grace, then the process ends.
        std::lock_guard lock(mu_);
        for (auto& [step_id, running] : running_) arm_reclaim_locked(*running, step_id);
        break;
      }
      case ControlRequest::Kind::kEndJob:  // a task got a stop signal
        job_signals::end_job(request.signal);
        return;
      case ControlRequest::Kind::kStepDone:
        on_step_done(request, m.source);
        return;
      case ControlRequest::Kind::kStallReport:
        // Off the engine's thread: reading the engine's table from its own callback is not safe.
        post([this, step_id = request.step_id] { report_stall(step_id); });
        return;
      case ControlRequest::Kind::kFlightRecord: {
        // The clock is read on arrival: the chief aligns this task's times with its own by it.
        const int64_t received_us = flight_now_us();
        post([this, id = request.handle, received_us] { send_flight_record(id, received_us); });
        return;
      }
      case ControlRequest::Kind::kRunStep:
        if (!request.subtree.empty() || !from_chief) forward_step(request, m.source);
        [[fallthrough]];
      default: {
        std::lock_guard lock(queue_mu_);
        queue_.push_back(std::move(request));
        // The serve thread, waiting, looks at the queue between the engine's rounds; the standby
        // thread sleeps until there is work for it.
        if (!serve_in_step_) return;
      }
    }
    queue_cv_.notify_all();
  } catch (const std::exception& e) {
    std::cerr << "weft: [task " << task_ << "] " << e.what() << "\n";
  }
}

void TaskServer::check_chief_alive() {
  const auto heard = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(heard_from_chief_.load()));
  if (std::chrono::steady_clock::now() - heard <= rt_.liveness_timeout) return;
  std::cerr << "weft: [task " << task_ << "] the chief has not been heard from for " << rt_.liveness_timeout.count()
            << " ms; ending the job" << std::endl;
  MPI_Abort(MPI_COMM_WORLD, 14);
}

void TaskServer::stand_by() {
  std::unique_lock lock(queue_mu_);
  while (!shutdown_requested_) {
    if (serve_in_step_ && !queue_.empty()) {
      ControlRequest request = std::move(queue_.front());
      queue_.pop_front();
      standby_busy_ = true;
      lock.unlock();
      handle(request);  // a RunStep goes to a step thread: this one keeps serving
      lock.lock();
      standby_busy_ = false;
      queue_cv_.notify_all();
      continue;
    }
    queue_cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    check_chief_alive();
    lock.lock();
  }
}

void TaskServer::handle(const ControlRequest& request) {
  switch (request.kind) {
    case ControlRequest::Kind::kRegister: {
      std::exception_ptr error;
      try {
        register_graph(request);
      } catch (...) {
        error = error_at_task(std::current_exception(), task_);
      }
      reply([&](capnp::MessageBuilder& b) {
        auto r = b.initRoot<proto::Reply>();
        r.setKind(proto::Reply::Kind::REGISTER);
        r.setHandle(request.handle);
        if (error) {
          r.setHasError(true);
          error_to_proto(error, r.initError());
        }
      });
      return;
    }
    case ControlRequest::Kind::kRunStep:
      start_step(request, /*on_serve_thread=*/false);
      return;
    case ControlRequest::Kind::kRelease: {
      std::lock_guard lock(mu_);
      graphs_.erase(request.handle);
      return;
    }
    case ControlRequest::Kind::kEndSession: {
      std::lock_guard lock(mu_);
      sessions_.erase(request.session);
      return;
    }
    case ControlRequest::Kind::kResetCollectives:
      // Off the serve loop: the reset waits (bounded) for every task, and pings must still be answered.
      post([this] {
        std::exception_ptr error;
        try {
          process_collectives().reset(kCollectivesResetTimeout);
        } catch (...) {
          error = error_at_task(std::current_exception(), task_);
        }
        reply([&](capnp::MessageBuilder& b) {
          auto r = b.initRoot<proto::Reply>();
          r.setKind(proto::Reply::Kind::RESET_COLLECTIVES);
          if (error) {
            r.setHasError(true);
            error_to_proto(error, r.initError());
          }
        });
      });
      return;
    case ControlRequest::Kind::kTimelineControl:
      control_timeline(request);
      return;
    case ControlRequest::Kind::kPing:
    case ControlRequest::Kind::kAbortStep:
    case ControlRequest::Kind::kShutdown:
    case ControlRequest::Kind::kStepDone:
    case ControlRequest::Kind::kStallReport:
    case ControlRequest::Kind::kFlightRecord:
    case ControlRequest::Kind::kEndJob:
      return;  // handled on arrival (on_request)
  }
}

void TaskServer::control_timeline(const ControlRequest& request) {
  // Read first: the chief aligns this task's clock with its own by this reading.
  const int64_t received_us = timeline::now_us();
  if (!request.timeline_enable) timeline::set_enabled(false);
  std::string events;
  if (request.timeline_collect) events = timeline::encode_events(timeline::take_events());
  if (request.timeline_enable) timeline::set_enabled(true);
  reply([&](capnp::MessageBuilder& b) {
    auto r = b.initRoot<proto::Reply>();
    r.setKind(proto::Reply::Kind::TIMELINE);
    r.setHandle(request.handle);
    r.setTaskTime(received_us);
    if (events.size() > timeline::kMaxEncodedBytes) {
      r.setHasError(true);
      error_to_proto(std::make_exception_ptr(OutOfRange("[task " + task_ + "] " + std::to_string(events.size()) +
                                                                " bytes of timeline events, more than the chief accepts")),
                     r.initError());
      return;
    }
    if (request.timeline_collect)
      r.setTimeline(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(events.data()), events.size()));
  });
}

void TaskServer::register_graph(const ControlRequest& request) {
  const uint64_t session = request.session, handle = request.handle;
  const std::vector<std::string>& partitions = request.partitions;
  auto graph = std::make_shared<RegisteredGraph>();
  graph->session = session;
  graph->reply_edges.insert(request.reply_edges.begin(), request.reply_edges.end());
  std::lock_guard lock(mu_);
  if (graphs_.contains(handle)) throw InvalidArgument("[cluster] graph handle " + std::to_string(handle) + " registered twice");
  Store& store = sessions_[session];
  for (size_t i = 0; i < partitions.size(); ++i) {
    GraphIR g = decode_graph(partitions[i], "partition " + std::to_string(i) + " of graph " + std::to_string(handle));
    share_variables(g, store);
    if (!g.args.empty() || !g.results.empty())
      throw InvalidArgument("[cluster] a task's partition must not have feeds or fetches (they live on the chief)");
    graph->executors.push_back(partition_executor(std::make_shared<const GraphIR>(std::move(g))));
    graph->parallel |= graph->executors.back()->parallel();
  }
  graph->parallel |= graph->executors.size() > 1;
  graphs_[handle] = std::move(graph);
}

void TaskServer::start_step(const ControlRequest& request, bool on_serve_thread) {
  const uint64_t handle = request.handle;
  const int64_t step_id = request.step_id;
  std::shared_ptr<const RegisteredGraph> graph;
  std::exception_ptr early;
  {
    std::lock_guard lock(mu_);
    auto it = graphs_.find(handle);
    if (it != graphs_.end()) graph = it->second;
    if (auto a = aborted_early_.find(step_id); a != aborted_early_.end()) {
      early = a->second;
      aborted_early_.erase(a);
    }
  }
  auto answer = [this, step_id](const std::exception_ptr& error, std::vector<StepTensor> tensors) {
    answer_step(step_id, error, std::move(tensors));
  };
  if (!graph) {
    answer(std::make_exception_ptr(
               InvalidArgument("[task " + task_ + "] step " + std::to_string(step_id) + " names graph handle " +
                               std::to_string(handle) + ", which is not registered here")),
           {});
    return;
  }
  if (early) {
    answer(early, {});
    return;
  }
  // The chief's small sends to this task, there before any Recv of the step asks for them.
  try {
    for (const StepTensor& t : request.tensors) rt_.rendezvous().deliver_from_peer(rt_.spec().chief_rank(), t.key, t.value, t.is_dead);
  } catch (...) {
    rt_.rendezvous().cleanup_step(step_id);
    answer(error_at_task(std::current_exception(), task_), {});
    return;
  }
  auto step = [this, graph, step_id, answer] {
    RunningStep running;
    {
      std::lock_guard lock(mu_);
      running_[step_id] = &running;
    }
    std::exception_ptr error;
    std::vector<StepTensor> tensors;
    try {
      tensors = run_step(graph, step_id, running);
    } catch (...) {
      error = error_at_task(std::current_exception(), task_);
    }
    {
      std::lock_guard lock(mu_);
      running_.erase(step_id);
    }
    rt_.rendezvous().cleanup_step(step_id);
    answer(error, std::move(tensors));
  };
  if (on_serve_thread) step();
  else post(std::move(step));
}

std::vector<StepTensor> TaskServer::run_step(std::shared_ptr<const RegisteredGraph> graph, int64_t step_id,
                                             RunningStep& running) {
  std::vector<std::vector<Tensor>> fetches(graph->executors.size());
  std::vector<Executor::Part> parts;
  for (size_t i = 0; i < graph->executors.size(); ++i) parts.push_back({graph->executors[i].get(), {}, &fetches[i]});
  StepRendezvous rendezvous(rt_.rendezvous(), {.capture = graph->reply_edges.empty() ? nullptr : &graph->reply_edges});
  std::unique_ptr<Executor::RunningStep> local = Executor::start_together(parts, {.step_id = step_id,
                                                                                 .rendezvous = &rendezvous,
                                                                                 .collectives = &process_step_collectives(),
                                                                                 .cancellation = &running.cancel,
                                                                                 .senders_in_process = false,
                                                                                 .parallel = graph->parallel});
  // This thread drives the progress engine between runs of what is ready, so the step's Recvs and
  // collectives complete here rather than on the engine's thread with a wake-up of this one.
  MpiProgressEngine& engine = rt_.channel().engine();
  {
    std::lock_guard lock(mu_);
    running.local = local.get();  // for stall reports, until the step is over
  }
  struct Forget {
    TaskServer& server;
    RunningStep& running;
    ~Forget() {
      std::lock_guard lock(server.mu_);
      running.local = nullptr;
      running.reclaim.reset();
    }
  } forget{*this, running};
  local->wake_with([&engine] { engine.wake(); });
  engine.drive_until([&] { return local->run_ready(); }, std::chrono::steady_clock::time_point::max());
  local->finish();
  return rendezvous.take_captured();
}

void TaskServer::abort_step(int64_t step_id, std::exception_ptr error) {
  RunningStep* running = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(step_id);
    if (it != running_.end()) running = it->second;
    else if (aborted_early_.size() < 4096) aborted_early_[step_id] = error;
    // (Cancelling under the lock keeps `running` alive: its thread erases it under the lock.)
    if (running) running->cancel.cancel(error);
    if (running && ended_by_deadline(error)) arm_reclaim_locked(*running, step_id);
  }
  rt_.rendezvous().abort_step(step_id, error);
}

void TaskServer::arm_reclaim_locked(RunningStep& running, int64_t step_id) {
  if (!running.local || running.reclaim) return;
  running.reclaim = std::make_unique<StallWatch>(
      StallWatch::Options{.owner = stall_owner_, .step_id = step_id, .reclaim_only = true},
      [local = running.local] { return local->in_flight(); }, nullptr);
}

void TaskServer::report_stall(int64_t step_id) {
  TaskStallReport report;
  {
    // Under the lock, so no step's executors go away while they are read.
    std::lock_guard lock(mu_);
    std::vector<const Executor::RunningStep*> steps;
    for (const auto& [id, running] : running_)
      if (running->local) steps.push_back(running->local);
    report = describe_stalled_task(steps, rt_.channel().engine());
  }
  reply([&](capnp::MessageBuilder& b) {
    auto r = b.initRoot<proto::Reply>();
    r.setKind(proto::Reply::Kind::STALL_REPORT);
    r.setHandle(static_cast<uint64_t>(step_id));
    r.setReport(report.lines);
    r.setInCollective(report.in_collective);
  });
}

void TaskServer::send_flight_record(uint64_t id, int64_t received_us) {
  const FlightRecorder& recorder = process_flight_recorder();
  const std::vector<FlightEntry> entries = recorder.snapshot();
  const uint64_t recorded = recorder.recorded();
  reply([&](capnp::MessageBuilder& b) {
    auto r = b.initRoot<proto::Reply>();
    r.setKind(proto::Reply::Kind::FLIGHT_RECORD);
    r.setHandle(id);
    r.setTaskTime(received_us);
    r.setFlightRecorded(recorded);
    write_flight_entries(entries, r);
  });
}

void TaskServer::forward_step(ControlRequest& request, int source) {
  StepInTree step;
  step.parent = source;
  std::vector<ForwardedStep> children;
  for (ForwardedStep& child : request.subtree) {
    if (child.rank <= 0 || child.rank >= rt_.spec().num_tasks() || child.rank == rt_.rank() || child.rank == source ||
        step.children.contains(child.rank)) {
      std::cerr << "weft: [task " << task_ << "] step " << request.step_id << " from " << rt_.task_name(source)
                << " is to be forwarded to rank " << child.rank << ", which cannot be; not forwarded\n";
      continue;
    }
    step.children.insert(child.rank);
    children.push_back(std::move(child));
  }
  request.subtree.clear();
  {
    std::lock_guard lock(tree_mu_);
    tree_steps_[request.step_id] = std::move(step);
  }
  for (const ForwardedStep& child : children) {
    capnp::MallocMessageBuilder message;
    write_run_step(request.handle, request.step_id, child, message.initRoot<proto::Request>().initRunStep());
    rt_.channel().send(child.rank, kRequestTag, message);
  }
}

void TaskServer::on_step_done(ControlRequest& request, int source) {
  std::optional<StepInTree> done;
  {
    std::lock_guard lock(tree_mu_);
    auto it = tree_steps_.find(request.step_id);
    if (it == tree_steps_.end() || !it->second.children.erase(source)) {
      std::cerr << "weft: [task " << task_ << "] " << rt_.task_name(source) << " answered step " << request.step_id
                << ", which this task did not forward to it; ignored\n";
      return;
    }
    StepInTree& step = it->second;
    for (StepAnswer& a : step_answers(source, std::move(request.step_done))) step.gathered.push_back(std::move(a));
    if (step.own_done && step.children.empty()) {
      done = std::move(step);
      tree_steps_.erase(it);
    }
  }
  if (done) send_up(request.step_id, *done);
}

void TaskServer::answer_step(int64_t step_id, std::exception_ptr error, std::vector<StepTensor> tensors) {
  StepAnswer own{rt_.rank(), std::move(error), std::move(tensors)};
  std::optional<StepInTree> done;
  bool in_tree = false, error_to_chief = false;
  {
    std::lock_guard lock(tree_mu_);
    if (auto it = tree_steps_.find(step_id); it != tree_steps_.end()) {
      in_tree = true;
      StepInTree& step = it->second;
      // An error goes to the chief at once, so the step is cancelled everywhere without waiting
      // for this subtree; it also goes up the tree, where the chief ignores it as a repeat.
      error_to_chief = own.error && step.parent != rt_.spec().chief_rank();
      step.own_done = true;
      step.own = error_to_chief ? StepAnswer{own.rank, own.error, {}} : std::move(own);
      if (step.children.empty()) {
        done = std::move(step);
        tree_steps_.erase(it);
      }
    }
  }
  if (in_tree && !error_to_chief) {
    if (done) send_up(step_id, *done);
    return;
  }
  // Straight from the chief with nothing to forward (the common case), or an error.
  capnp::MallocMessageBuilder message;
  write_step_answer(step_id, own, {}, message.initRoot<proto::Reply>());
  rt_.channel().send(rt_.spec().chief_rank(), kReplyTag, message);
  if (done) send_up(step_id, *done);
}

void TaskServer::send_up(int64_t step_id, const StepInTree& step) {
  capnp::MallocMessageBuilder message;
  if (step.parent == rt_.spec().chief_rank()) {
    write_step_answer(step_id, step.own, step.gathered, message.initRoot<proto::Reply>());
    rt_.channel().send(step.parent, kReplyTag, message);
    return;
  }
  write_step_answer(step_id, step.own, step.gathered, message.initRoot<proto::Request>().initStepDone());
  rt_.channel().send(step.parent, kRequestTag, message);
}

}  // namespace weft
