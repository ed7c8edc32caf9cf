// The executor's plan entries and per-run state, shared by executor.cpp (planning, one step,
// sequential runs) and executor_frame.cpp (runs driven by a ready queue: parallel, asynchronous
// and multi-partition ones). Internal to scheduler/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/cancellation.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"
#include "runtime/timeline.h"
#include "scheduler/executor.h"

namespace weft {

struct Executor::Step {
  const Node* node = nullptr;
  Device* device = nullptr;     // where the kernel runs and its outputs live
  KernelFn fn = nullptr;        // synchronous kernel (null for a view op without one)
  AsyncKernelFn async = nullptr;
  int32_t async_slot = -1;      // index of this step's slot in RunState::async (async steps)
  int32_t run_counter = -1;     // a kRandom node's index in Executor::run_counts_
  std::vector<int32_t> inputs;  // value ids, one per input slot
  int32_t first_output = 0;     // value ids first_output .. first_output + num_outputs - 1
  int32_t num_outputs = 0;
  bool static_shapes = true;    // every output shape known: no inference at run time
  int32_t reuse_input = -1;     // input slot whose buffer output 0 may take over
  std::vector<int32_t> successors;  // plan indices, one entry per edge (data or control)
  int32_t pending = 0;              // edges into this step from planned steps
  const std::string* track = nullptr;  // the timeline's track: the device's full name
  // A Const on a device that cannot read its host value (a GPU): the value there, uploaded once
  // when the executor is made instead of on every run. Held here, so no kernel writes over it.
  Tensor preloaded;
  // OpDef::prepare's result for this node (KernelContext::prepared), derived when the executor is made.
  std::shared_ptr<const void> prepared;
};

// The step's frame, told when an asynchronous kernel of the step stops waiting for another
// partition (RunContext::async_wait_over).
class AsyncWaitObserver {
 public:
  virtual void async_wait_over(const KernelContext& kernel) = 0;

 protected:
  ~AsyncWaitObserver() = default;
};

class Executor::Context final : public RunContext {
 public:
  explicit Context(const Executor& exec) : exec_(exec) {}
  VariableState& variable(std::string_view name) override {
    const auto& vars = exec_.graph_->variables;
    auto it = vars.find(name);
    if (it == vars.end()) throw NotFound("[executor] the graph has no variable named '" + std::string(name) + "'");
    return *it->second;
  }
  std::vector<Tensor> call(const GraphIR& body, std::span<const Tensor> args, Device& device) override {
    // The body's collectives take part in this step's groups; it has no rendezvous of its own.
    const Executor& body_exec = exec_.body_executor(body, device);
    body_exec.check_feed_count(args.size());
    for (size_t i = 0; i < args.size(); ++i) body_exec.check_feed(i, args[i]);
    return body_exec.run_checked_feeds(args, {.step_id = step_.step_id, .collectives = step_.collectives});
  }
  int64_t step_id() const override { return step_.step_id; }
  Rendezvous* rendezvous() const override { return step_.rendezvous; }
  Collectives* collectives() const override { return step_.collectives; }
  CancellationManager* cancellation() const override { return step_.cancellation; }
  void async_wait_over(const KernelContext& kernel) override {
    if (wait_observer_) wait_observer_->async_wait_over(kernel);
  }
  void set_step(const StepOptions& step) { step_ = step; }
  // The step's frame, which counts the asynchronous kernels that wait (null outside a step).
  void set_wait_observer(AsyncWaitObserver* frame) { wait_observer_ = frame; }

 private:
  const Executor& exec_;
  StepOptions step_;
  AsyncWaitObserver* wait_observer_ = nullptr;
};

struct Executor::RunState {
  explicit RunState(const Executor& exec)
      : values(static_cast<size_t>(exec.num_values_)),
        readers(new std::atomic<int32_t>[static_cast<size_t>(exec.num_values_)]),
        pending(new std::atomic<int32_t>[exec.plan_.size()]),
        started_ms(new std::atomic<int64_t>[exec.plan_.size()]),
        async(static_cast<size_t>(exec.num_async_)),
        ctx(exec) {
    for (size_t s = 0; s < exec.plan_.size(); ++s) started_ms[s].store(kNotRunning, std::memory_order_relaxed);
  }
  // Relaxed stores are plain moves; a run driven by a ready queue hands its work over through a
  // mutex, which orders them before any other thread's reads.
  void reset(const Executor& exec) {
    for (int32_t v = 0; v < exec.num_values_; ++v)
      readers[v].store(exec.value_readers_[static_cast<size_t>(v)], std::memory_order_relaxed);
    for (size_t s = 0; s < exec.plan_.size(); ++s) pending[s].store(exec.plan_[s].pending, std::memory_order_relaxed);
  }
  // Drops the run's hold on value v: a fed value is only borrowed from the caller's span.
  void release(const Executor& exec, int32_t v) {
    Tensor& t = values[static_cast<size_t>(v)];
    if (v < exec.num_feeds_) forget_borrowed(t);
    else t = Tensor();
  }
  // What an asynchronous kernel holds until it calls back: its inputs, outputs and context.
  struct AsyncSlot {
    std::vector<Tensor> io;  // inputs (borrowed), then outputs
    std::optional<KernelContext> kc;
    int64_t timeline_start_us = -1;  // when the kernel started, if the timeline was recording
    // The kernel's context while it counts as waiting for another partition: set when it starts,
    // cleared when it says its wait is over (RunContext::async_wait_over) or calls back. Guarded by
    // the step's frame's mutex, so the frame can look for a kernel among every slot while other
    // slots' contexts come and go.
    const KernelContext* waiting = nullptr;
  };

  std::vector<Tensor> values;
  std::vector<Tensor> scratch;  // a step's inputs and outputs (sequential runs)
  std::unique_ptr<std::atomic<int32_t>[]> readers;  // reads left before the value is released
  std::unique_ptr<std::atomic<int32_t>[]> pending;
  // Per plan step, when its kernel started (runtime/coarse_clock.h), or kNotRunning: what stall
  // reports read (Executor::RunningStep::in_flight). Written by runs driven by a ready queue.
  static constexpr int64_t kNotRunning = -1;
  std::unique_ptr<std::atomic<int64_t>[]> started_ms;
  std::vector<AsyncSlot> async;
  Context ctx;
};

// Appends the node's name and source line to the error being handled, unless it names them.
[[noreturn]] void rethrow_for_node(const Node& n);

// Records one run of a node on the timeline, from start_us until now, on the track of its device.
// Asynchronous kernels wait for others: a Recv for its tensor, a collective for its peers.
void record_on_timeline(const Node& n, bool async, const std::string& track, int64_t start_us);

}  // namespace weft
