#include "cluster/task_server.h"

#include <chrono>
#include <iostream>

#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "comm/collective_executor.h"
#include "runtime/graph_format.h"
#include "runtime/timeline.h"
#include "runtime/timeline_format.h"

namespace weft {

namespace {

// Set on the serve thread while it reads a request outside any step: a RunStep read then runs on
// that thread (TaskServer::inline_step_).
thread_local bool t_serve_loop = false;

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

TaskServer::TaskServer(ClusterRuntime& runtime) : rt_(runtime), task_(runtime.task_name(runtime.rank())) {}

TaskServer::~TaskServer() {
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
  heard_from_chief_ = std::chrono::steady_clock::now();
  last_poll_ = heard_from_chief_.time_since_epoch().count();
  std::thread standby([this] { stand_by(); });
  auto idle_since = std::chrono::steady_clock::now();
  while (!shutdown_requested_) {
    t_serve_loop = true;
    const bool handled = poll_once();
    t_serve_loop = false;
    if (inline_step_) {
      auto step = std::move(inline_step_);
      inline_step_ = nullptr;
      serve_thread_in_step_ = true;
      step(/*on_serve_thread=*/true);
      serve_thread_in_step_ = false;
    }
    if (handled) {
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    // Polling at full speed while steps come keeps a step's round trip in microseconds; an
    // idle task backs off to short sleeps.
    if (std::chrono::steady_clock::now() - idle_since < std::chrono::milliseconds(2)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  standby_cv_.notify_all();
  standby.join();
}

bool TaskServer::poll_once() {
  std::unique_lock serving(poll_mu_, std::try_to_lock);
  if (!serving.owns_lock()) return false;
  const auto now = std::chrono::steady_clock::now();
  last_poll_ = now.time_since_epoch().count();
  std::optional<ControlChannel::Message> m;
  try {
    m = rt_.channel().try_receive(kRequestTag, rt_.spec().chief_rank());
  } catch (const std::exception& e) {
    std::cerr << "weft: [task " << task_ << "] " << e.what() << "\n";
    return true;
  }
  if (!m) {
    // The chief pings every second: silence means it died (under mpirun --enable-recovery
    // nothing else would end this process), so the job is ended, non-zero, by name.
    if (now - heard_from_chief_ > rt_.liveness_timeout) {
      std::cerr << "weft: [task " << task_ << "] the chief has not been heard from for "
                << rt_.liveness_timeout.count() << " ms; ending the job" << std::endl;
      MPI_Abort(MPI_COMM_WORLD, 14);
    }
    return false;
  }
  heard_from_chief_ = now;
  try {
    const ControlRequest request = decode_request(m->words, "the chief");
    if (request.kind == ControlRequest::Kind::kShutdown) shutdown_requested_ = true;
    else handle(request);
  } catch (const std::exception& e) {
    // A request that cannot be read is the chief's bug or damage on the way: say so, go on.
    std::cerr << "weft: [task " << task_ << "] " << e.what() << "\n";
  }
  return true;
}

void TaskServer::stand_by() {
  std::unique_lock lock(standby_mu_);
  for (;;) {
    standby_cv_.wait_for(lock, kStandbyAfter, [&] { return shutdown_requested_.load(); });
    if (shutdown_requested_) return;
    const auto last = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(last_poll_.load()));
    if (!serve_thread_in_step_ || std::chrono::steady_clock::now() - last < kStandbyAfter) continue;
    lock.unlock();
    while (poll_once()) {
    }
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
      start_step(request);
      return;
    case ControlRequest::Kind::kAbortStep:
      abort_step(request.step_id, request.error);
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
    case ControlRequest::Kind::kPing:
      reply([](capnp::MessageBuilder& b) { b.initRoot<proto::Reply>().setKind(proto::Reply::Kind::PING); });
      return;
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
    case ControlRequest::Kind::kShutdown:
      return;
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

void TaskServer::start_step(const ControlRequest& request) {
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
  auto answer = [this, step_id](const std::exception_ptr& error, const std::vector<StepTensor>& tensors) {
    reply([&](capnp::MessageBuilder& b) {
      auto r = b.initRoot<proto::Reply>();
      r.setKind(proto::Reply::Kind::RUN_STEP);
      r.setStepId(step_id);
      if (error) {
        r.setHasError(true);
        error_to_proto(error, r.initError());
        return;
      }
      if (!tensors.empty()) write_step_tensors(tensors, r.initTensors(static_cast<unsigned>(tensors.size())));
    });
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
  auto step = [this, graph, step_id, answer](bool on_serve_thread) {
    RunningStep running;
    {
      std::lock_guard lock(mu_);
      running_[step_id] = &running;
    }
    std::exception_ptr error;
    std::vector<StepTensor> tensors;
    try {
      tensors = run_step(graph, step_id, running, on_serve_thread);
    } catch (...) {
      error = error_at_task(std::current_exception(), task_);
    }
    {
      std::lock_guard lock(mu_);
      running_.erase(step_id);
    }
    rt_.rendezvous().cleanup_step(step_id);
    answer(error, tensors);
  };
  if (t_serve_loop && !inline_step_) inline_step_ = std::move(step);
  else post([step = std::move(step)] { step(/*on_serve_thread=*/false); });
}

std::vector<StepTensor> TaskServer::run_step(std::shared_ptr<const RegisteredGraph> graph, int64_t step_id,
                                             RunningStep& running, bool on_serve_thread) {
  std::vector<std::vector<Tensor>> fetches(graph->executors.size());
  std::vector<Executor::Part> parts;
  for (size_t i = 0; i < graph->executors.size(); ++i) parts.push_back({graph->executors[i].get(), {}, &fetches[i]});
  StepRendezvous rendezvous(rt_.rendezvous(), {.capture = graph->reply_edges.empty() ? nullptr : &graph->reply_edges});
  // On the serve thread, the step's wait reads the chief's requests and tests the collectives.
  const std::function<bool()> serve_while_waiting = [this] {
    const bool collectives = process_collectives().poll();
    return poll_once() || collectives;
  };
  Executor::run_together(parts, {.step_id = step_id,
                                 .rendezvous = &rendezvous,
                                 .cancellation = &running.cancel,
                                 .senders_in_process = false,
                                 .parallel = graph->parallel,
                                 .poll_while_waiting = on_serve_thread ? &serve_while_waiting : nullptr});
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
  }
  rt_.rendezvous().abort_step(step_id, error);
}

}  // namespace weft
