// Runs driven by a ready queue: a parallel executor, an executor with asynchronous kernels, and
// the partitions of one graph run together as one step (Executor::run_together).
//
// A Frame holds one step's queue of ready nodes, over every part. The calling thread drains it;
// when there is more than one thing to do, helpers on the inter-op pool drain it too. A helper
// never waits: it leaves when the queue is empty, so no pool thread is ever held by a step that
// waits for another partition or process. Only the calling thread sleeps, on the frame's
// condition variable, while nothing is ready and asynchronous kernels are in flight.
//
// `outstanding_` counts tokens: one per queued node, per node being run and per asynchronous
// kernel in flight. A worker that finishes a node keeps its token for one ready successor (so a
// chain runs on one thread without touching the queue) and queues the others with a token each;
// an asynchronous kernel takes its node's token and gives it back from its callback. The step is
// over when no token is left and no helper is still inside the frame.
#include <algorithm>
#include <chrono>
#include <thread>

#include "runtime/coarse_clock.h"
#include "runtime/device.h"
#include "runtime/rendezvous.h"
#include "runtime/tensor_internals.h"
#include "scheduler/executor_state.h"
#include "scheduler/inter_op_pool.h"
#include "scheduler/stall_watchdog.h"

namespace weft {

class Executor::Frame final : public AsyncWaitObserver {
 public:
  Frame(std::span<const Part> parts, const StepOptions& step) : parts_(parts), step_(step) {
    states_.reserve(parts.size());
    bool parallel = step.parallel;
    for (const Part& p : parts) {
      states_.push_back(p.executor->take_run_state(p.feeds, step));
      states_.back()->ctx.set_wait_observer(this);
      parallel |= p.executor->parallel_;
    }
    // From inside a pool thread, helpers could find no free thread; the caller drains alone.
    allow_helpers_ = parallel && !InterOpPool::in_pool_thread();
  }

  ~Frame() {
    for (size_t i = 0; i < parts_.size(); ++i) {
      states_[i]->ctx.set_wait_observer(nullptr);
      parts_[i].executor->give_back(std::move(states_[i]));
    }
  }

  // The kernel's token stays counted (the step is not over), but it no longer makes the step
  // look stuck: what it finishes now needs no other partition.
  void async_wait_over(const KernelContext& kernel) override {
    std::lock_guard lock(mu_);
    for (auto& st : states_)
      for (RunState::AsyncSlot& slot : st->async)
        if (slot.waiting == &kernel) {
          slot.waiting = nullptr;
          --async_in_flight_;
          return;
        }
  }

  // A step's options with a cancellation manager (`own`, when the caller gave none), its feeds
  // counted and its timeline span opened.
  static StepOptions prepare(std::span<const Part> parts, const StepOptions& options,
                             std::optional<CancellationManager>& own, std::optional<timeline::Span>& span) {
    StepOptions step = options;
    if (!step.cancellation) step.cancellation = &own.emplace();
    for (const Part& p : parts) p.executor->check_feed_count(p.feeds.size());
    if (timeline::enabled())
      span.emplace("step " + std::to_string(step.step_id), "step", local_task_name(),
                   timeline::Args{{"step_id", std::to_string(step.step_id)}});
    return step;
  }

  // Queues the initial nodes; nothing runs yet.
  void start() {
    CancellationManager& cm = *step_.cancellation;
    // A cancellation from outside (another task's error, an abort) stops this step too.
    token_ = cm.register_callback([this](const std::exception_ptr& e) { on_cancel(e); });
    std::vector<Item> initial;
    for (size_t p = 0; p < parts_.size(); ++p)
      for (int32_t index : parts_[p].executor->initial_ready_) initial.push_back({p, index});
    push(initial);
  }

  // Runs what is ready on the calling thread; whether the step is over.
  bool run_ready() {
    std::vector<Tensor> scratch;
    std::vector<Item> ready;
    std::unique_lock lock(mu_);
    caller_away_ = false;
    while (!ready_.empty()) {
      const Item item = ready_.back();
      ready_.pop_back();
      lock.unlock();
      work(item, scratch, ready);
      lock.lock();
    }
    caller_away_ = true;
    return outstanding_ == 0 && helpers_ == 0;
  }

  void wake_with(std::function<void()> wake) { wake_ = std::move(wake); }

  // Runs the rest (waiting plainly), then the step's error or its fetches.
  void finish() {
    drive(/*is_caller=*/true);
    if (token_ != kNoCancellationToken) step_.cancellation->deregister_callback(token_);
    token_ = kNoCancellationToken;
    if (error_) std::rethrow_exception(error_);
    for (size_t p = 0; p < parts_.size(); ++p) *parts_[p].fetches = parts_[p].executor->collect_fetches(*states_[p]);
  }


  // What runs now, for stall reports (RunningStep::in_flight).
  std::vector<RunningStep::InFlight> in_flight() const {
    std::vector<RunningStep::InFlight> out;
    const int64_t now = coarse_now_ms();
    std::lock_guard lock(mu_);  // guards the slots' `waiting`
    for (size_t p = 0; p < parts_.size(); ++p) parts_[p].executor->append_in_flight(*states_[p], now, out);
    return out;
  }

 private:
  struct Item {
    size_t part;
    int32_t index;  // into the part's executor's plan
  };

  const Step& step_of(const Item& item) const {
    return parts_[item.part].executor->plan_[static_cast<size_t>(item.index)];
  }

  // Runs ready nodes until the queue is empty; the caller then waits for the rest of the step.
  void drive(bool is_caller) {
    constexpr int kSpins = 2000;  // a few hundred microseconds of yields
    int spins = 0;
    std::vector<Tensor> scratch;
    std::vector<Item> ready;
    std::unique_lock lock(mu_);
    for (;;) {
      if (!ready_.empty()) {
        const Item item = ready_.back();  // last in, first out: the freshest values are in cache
        ready_.pop_back();
        lock.unlock();
        work(item, scratch, ready);
        lock.lock();
        continue;
      }
      if (!is_caller) {
        --helpers_;
        if (helpers_ == 0) done_.notify_all();
        return;
      }
      if (outstanding_ == 0 && helpers_ == 0) return;
      if (stuck()) {
        lock.unlock();
        fail(std::make_exception_ptr(Internal(stuck_message())));
        lock.lock();
        continue;
      }
      if (!step_.senders_in_process && spins < kSpins) {
        // Waiting for another process: its tensor usually comes within microseconds, sooner
        // than a sleeping thread wakes. Yield a while (the core goes only to ready threads).
        ++spins;
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        continue;
      }
      done_.wait(lock);
    }
  }

  // Runs `item` and then, on the same token, one successor it made ready, and so on.
  void work(Item item, std::vector<Tensor>& scratch, std::vector<Item>& ready) {
    for (;;) {
      if (failed_.load(std::memory_order_acquire)) return drop_token();
      const Step& s = step_of(item);
      if (s.async) return start_async(item);
      const Executor& exec = *parts_[item.part].executor;
      std::atomic<int64_t>& started = states_[item.part]->started_ms[item.index];
      started.store(coarse_now_ms(), std::memory_order_relaxed);
      try {
        exec.run_step<true>(s, *states_[item.part], scratch);
      } catch (...) {
        started.store(RunState::kNotRunning, std::memory_order_relaxed);
        fail(std::current_exception());
        return drop_token();
      }
      started.store(RunState::kNotRunning, std::memory_order_relaxed);
      ready.clear();
      collect_ready(item.part, s, ready);
      if (ready.empty()) return drop_token();
      item = ready[0];
      push(std::span<const Item>(ready).subspan(1));
    }
  }

  void collect_ready(size_t part, const Step& s, std::vector<Item>& out) {
    RunState& st = *states_[part];
    for (int32_t succ : s.successors)
      if (st.pending[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) out.push_back({part, succ});
  }

  // Queues nodes with a token each, and calls in a helper when there is one to spare.
  void push(std::span<const Item> items) {
    if (items.empty()) return;
    bool spawn = false, wake = false;
    {
      std::lock_guard lock(mu_);
      ready_.insert(ready_.end(), items.begin(), items.end());
      outstanding_ += static_cast<int>(items.size());
      if (allow_helpers_ && helpers_ < max_helpers() && ready_.size() > 1) {
        ++helpers_;
        spawn = true;
      }
      done_.notify_one();
      wake = wake_ && caller_away_;
    }
    if (wake) wake_();
    if (spawn) inter_op_pool().submit([this] { drive(/*is_caller=*/false); });
  }

  void drop_token() {
    std::lock_guard lock(mu_);
    // Notified under the lock: the caller may destroy the frame as soon as it sees the count.
    --outstanding_;
    if (outstanding_ == 0 || outstanding_ == async_in_flight_) done_.notify_all();
    // The last token: a caller waiting elsewhere comes back to see the step over (woken under the
    // lock too, for the same reason).
    if (outstanding_ == 0 && wake_ && caller_away_) wake_();
  }

  // Nothing runs and nothing is ready, yet asynchronous kernels wait: when every sender is in
  // this process, nobody is left to complete them. Called by the caller with mu_ held.
  bool stuck() const {
    return step_.senders_in_process && !failed_.load(std::memory_order_acquire) && ready_.empty() &&
           helpers_ == 0 && outstanding_ > 0 && outstanding_ == async_in_flight_;
  }

  // Names the waiting kernels; nothing else runs, so their slots can be read.
  std::string stuck_message() const {
    std::string names;
    int waiting = 0;
    for (size_t p = 0; p < parts_.size(); ++p)
      for (const Step& s : parts_[p].executor->plan_)
        if (s.async && states_[p]->async[static_cast<size_t>(s.async_slot)].kc) {
          if (waiting++ < 3) names += (names.empty() ? "" : ", ") + s.node->describe();
        }
    return "[executor] step " + std::to_string(step_.step_id) + " cannot finish: " + std::to_string(waiting) +
           " asynchronous node(s) wait for tensors no partition of the step will send: " + names;
  }

  // Starts an asynchronous kernel; its node's token now belongs to the callback.
  void start_async(const Item& item) {
    const Step& s = step_of(item);
    RunState& st = *states_[item.part];
    RunState::AsyncSlot& slot = st.async[static_cast<size_t>(s.async_slot)];
    const Node& n = *s.node;
    const size_t ni = s.inputs.size();
    slot.io.assign(ni + static_cast<size_t>(s.num_outputs), Tensor());
    std::span<Tensor> ins(slot.io.data(), ni);
    std::span<Tensor> outs(slot.io.data() + ni, static_cast<size_t>(s.num_outputs));
    try {
      for (size_t i = 0; i < ni; ++i) ins[i] = borrowed(st.values[static_cast<size_t>(s.inputs[i])]);
      settle_before_kernel_if_any(ins);
      allocate_outputs(*n.op, [&](size_t i) -> const TensorMeta& { return n.outputs[i]; }, ins, outs, *s.device);
      slot.kc.emplace(KernelContext{*n.op, ins, outs, n.attrs, *s.device, &st.ctx, 0, s.prepared.get()});
      slot.timeline_start_us = timeline::enabled() ? timeline::now_us() : -1;
      st.started_ms[item.index].store(coarse_now_ms(), std::memory_order_relaxed);
      {
        std::lock_guard lock(mu_);
        ++async_in_flight_;
        slot.waiting = &*slot.kc;
      }
      KernelRunning running;
      s.async(*slot.kc, [this, item](std::exception_ptr error) { finish_async(item, std::move(error)); });
    } catch (...) {
      // A kernel that throws has not called back: the token is still the node's.
      st.started_ms[item.index].store(RunState::kNotRunning, std::memory_order_relaxed);
      {
        std::lock_guard lock(mu_);
        if (slot.waiting) --async_in_flight_;
        slot.waiting = nullptr;
      }
      slot.kc.reset();
      for (Tensor& t : ins) forget_borrowed(t);
      fail_at(n, std::current_exception());
      drop_token();
    }
  }

  void finish_async(const Item& item, std::exception_ptr error) {
    const Step& s = step_of(item);
    RunState& st = *states_[item.part];
    RunState::AsyncSlot& slot = st.async[static_cast<size_t>(s.async_slot)];
    const Node& n = *s.node;
    const size_t ni = s.inputs.size();
    std::span<Tensor> ins(slot.io.data(), ni);
    std::span<Tensor> outs(slot.io.data() + ni, static_cast<size_t>(s.num_outputs));
    st.started_ms[item.index].store(RunState::kNotRunning, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      // The token (still counted) keeps the step from looking stuck.
      if (slot.waiting) --async_in_flight_;
      slot.waiting = nullptr;
    }
    // The whole wait, from the kernel's start until now: what a Recv's span is there to show.
    if (slot.timeline_start_us >= 0) record_on_timeline(n, true, *s.track, slot.timeline_start_us);
    std::vector<Item> ready;
    try {
      if (error) std::rethrow_exception(error);
      // What arrived crossed a device (later a process): it must be what the graph declared.
      for (size_t i = 0; i < outs.size(); ++i) {
        const TensorMeta& want = n.outputs[i];
        const Tensor& got = outs[i];
        bool ok = got.defined() && !got.is_symbolic() && got.dtype() == want.dtype && got.rank() == want.shape.rank();
        for (int64_t d = 0; ok && d < got.rank(); ++d) ok = want.shape[d] < 0 || want.shape[d] == got.shape()[d];
        if (!ok)
          throw Internal("[executor] output " + std::to_string(i) + " should be " + std::string(dtype_name(want.dtype)) +
                         want.shape.to_string() + ", got " +
                         (got.defined() ? std::string(dtype_name(got.dtype())) + got.shape().to_string()
                                        : std::string("nothing")));
      }
      parts_[item.part].executor->commit_step<true>(s, st, ins, outs);
      collect_ready(item.part, s, ready);
    } catch (...) {
      for (Tensor& t : ins) forget_borrowed(t);
      for (Tensor& t : outs) t = Tensor();
      fail_at(n, std::current_exception());
    }
    slot.kc.reset();
    push(ready);
    drop_token();
  }

  void fail_at(const Node& n, std::exception_ptr error) {
    try {
      try {
        std::rethrow_exception(error);
      } catch (...) {
        rethrow_for_node(n);
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }

  // The first error wins; it cancels the step everywhere (the rendezvous fails its transfers).
  void fail(std::exception_ptr error) {
    record(error);
    step_.cancellation->cancel(error);
  }

  void on_cancel(const std::exception_ptr& error) {
    record(error);
    if (step_.rendezvous) step_.rendezvous->abort_step(step_.step_id, error);
  }

  void record(const std::exception_ptr& error) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = error;
    failed_.store(true, std::memory_order_release);
  }

  std::span<const Part> parts_;
  StepOptions step_;
  CancellationToken token_ = kNoCancellationToken;
  std::function<void()> wake_;  // RunningStep::wake_with
  bool caller_away_ = false;    // guarded by mu_: the caller is not in run_ready
  std::vector<std::unique_ptr<RunState>> states_;  // one per part
  bool allow_helpers_ = false;
  // At most one helper per hardware thread. Read once: hardware_concurrency() opens
  // /sys/devices/system/cpu/online on every call, a few microseconds of file system per step.
  static int max_helpers() {
    static const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return n;
  }

  mutable std::mutex mu_;
  std::condition_variable done_;
  std::vector<Item> ready_;  // guarded by mu_
  int outstanding_ = 0;      // guarded by mu_
  int helpers_ = 0;          // guarded by mu_
  int async_in_flight_ = 0;  // guarded by mu_: asynchronous kernels started and not called back
  std::exception_ptr error_;  // guarded by mu_ until the step is over
  std::atomic<bool> failed_{false};
};

struct Executor::RunningStep::State {
  StepOptions options;
  std::optional<CancellationManager> own_cancellation;
  std::optional<timeline::Span> span;
  std::optional<Frame> frame;
  bool finished = false;
};

Executor::RunningStep::RunningStep(std::unique_ptr<State> state) : state_(std::move(state)) {}

Executor::RunningStep::~RunningStep() {
  if (state_->finished) return;
  try {
    finish();
  } catch (...) {
    // The caller gave up on the step (an error of its own): its error is not wanted.
  }
}

bool Executor::RunningStep::run_ready() { return state_->frame->run_ready(); }

std::vector<Executor::RunningStep::InFlight> Executor::RunningStep::in_flight() const {
  return state_->frame ? state_->frame->in_flight() : std::vector<InFlight>{};
}

void Executor::RunningStep::wake_with(std::function<void()> wake) { state_->frame->wake_with(std::move(wake)); }

void Executor::RunningStep::finish() {
  state_->finished = true;
  state_->frame->finish();
}

std::unique_ptr<Executor::RunningStep> Executor::start_together(std::span<const Part> parts,
                                                                const StepOptions& options) {
  auto state = std::make_unique<RunningStep::State>();
  state->options = Frame::prepare(parts, options, state->own_cancellation, state->span);
  state->frame.emplace(parts, state->options);
  state->frame->start();
  return std::unique_ptr<RunningStep>(new RunningStep(std::move(state)));
}

void Executor::run_together(std::span<const Part> parts, const StepOptions& options) {
  // As start_together and finish, without the heap: every local run with parallel work comes here.
  std::optional<CancellationManager> own;
  std::optional<timeline::Span> span;
  const StepOptions step = Frame::prepare(parts, options, own, span);
  Frame frame(parts, step);
  std::optional<StallWatch> watch;
  if (step.stall_warning.count() > 0 || step.stall_timeout.count() > 0)
    watch.emplace(StallWatch::Options{.owner = step.owner, .step_id = step.step_id,
                                      .limits = {step.stall_warning, step.stall_timeout}},
                  [&frame] { return frame.in_flight(); },
                  [c = step.cancellation](std::exception_ptr error) { c->cancel(std::move(error)); });
  frame.start();
  frame.finish();
}

}  // namespace weft
