#include "scheduler/executor.h"

#include <algorithm>
#include <optional>
#include <set>

#include "runtime/coarse_clock.h"
#include "runtime/device.h"
#include "runtime/device_transfer.h"
#include "runtime/tensor_internals.h"
#include "scheduler/executor_state.h"
#include "scheduler/inter_op_pool.h"
#include "scheduler/stall_watchdog.h"

namespace weft {

namespace {

// The device a node runs on: its assigned one, else the executor's default (graphs that were
// never placed, control-flow bodies running where their node runs).
Device* device_of(const Node& n, Device* default_device) {
  if (n.assigned_device.empty()) return default_device ? default_device : cpu_device();
  Device* d = find_device(n.assigned_device);
  if (!d)
    throw InvalidArgument("[executor] " + n.describe() + " is assigned to device '" + n.assigned_device +
                          "', which this process does not have");
  return d;
}

// The device's full name, kept once for the process: a plan points at it for the timeline (a
// pointer keeps the plan's steps small, and the executor's hot loop with them).
const std::string& timeline_track(const Device& d) {
  static std::mutex mu;
  static std::set<std::string> names;  // elements never move
  std::string name = cluster_device_name(d);
  std::lock_guard lock(mu);
  return *names.insert(std::move(name)).first;
}

bool exclusively_owned(const Tensor& t, int32_t extra_handles) {
  const TensorImpl* impl = tensor_impl_or_null(t);
  return impl && impl->ref_count() == 1 + extra_handles && impl->buffer && impl->buffer->ref_count() == 1;
}

// Counts one read of a value; true when it was the last. A sequential run owns its run state
// alone, so it needs no atomic read-modify-write: each is a locked instruction of ~20 cycles, and
// a call of a small graph is made of little else.
template <bool kConcurrent>
bool count_last_read(std::atomic<int32_t>& readers) {
  if constexpr (kConcurrent) {
    return readers.fetch_sub(1, std::memory_order_acq_rel) == 1;
  } else {
    const int32_t left = readers.load(std::memory_order_relaxed) - 1;
    readers.store(left, std::memory_order_relaxed);
    return left == 0;
  }
}

}  // namespace

[[noreturn]] void rethrow_for_node(const Node& n) {
  try {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.find("created at") != std::string::npos && what.find(n.name) != std::string::npos) throw;
    throw_error(e.code(), what + " [" + n.describe() + "]");
  } catch (const std::exception& e) {
    throw Internal(std::string(e.what()) + " [" + n.describe() + "]");
  }
}

void record_on_timeline(const Node& n, bool async, const std::string& track, int64_t start_us) {
  const std::string& op = n.type();
  const char* category = op == "Send" ? "send" : op == "Recv" ? "recv" : async ? "collective" : "kernel";
  timeline::record(n.name, category, track, start_us, timeline::now_us(), {{"op", op}, {"node", n.name}});
}

Executor::Executor(std::shared_ptr<const GraphIR> graph, ExecutorSpec spec, Parallelism parallelism)
    : graph_(std::move(graph)), spec_(std::move(spec)) {
  const GraphIR& g = *graph_;
  std::map<Endpoint, int32_t> fed;
  for (size_t i = 0; i < spec_.feeds.size(); ++i) {
    (void)g.meta(spec_.feeds[i]);  // throws for an endpoint that does not exist
    fed.emplace(spec_.feeds[i], static_cast<int32_t>(i));
  }

  // Which nodes the fetches and targets need, cutting at fed values.
  std::vector<int32_t> roots = spec_.targets;
  for (const Endpoint& e : spec_.fetches) {
    (void)g.meta(e);
    if (!fed.contains(e)) roots.push_back(e.node);
  }
  const std::vector<char> needed = needed_nodes(g, roots, [&](const Endpoint& e) { return fed.contains(e); });

  // Value ids: the feeds first, then every planned node's outputs.
  num_feeds_ = static_cast<int32_t>(spec_.feeds.size());
  num_values_ = num_feeds_;
  std::vector<int32_t> plan_index(static_cast<size_t>(g.id_bound()), -1);
  int32_t num_counted = 0;
  for (int32_t id : g.topological_order()) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = g.node(id);
    if (n.type() == "Placeholder")
      throw InvalidArgument("[executor] placeholder '" + n.name + "' (" + std::string(dtype_name(n.outputs[0].dtype)) +
                            n.outputs[0].shape.to_string() + ") must be fed: the fetched values depend on it");
    Step s;
    s.node = &n;
    s.device = device_of(n, spec_.device);
    const KernelRef kernel = kernel_for(*n.op, s.device->type(), kernel_dtype(g, n), n.describe());
    s.fn = kernel.sync;
    s.async = kernel.async;
    s.track = &timeline_track(*s.device);
    if (s.async) s.async_slot = num_async_++;
    if (n.type() == "Const")
      if (const Tensor& value = n.attrs.get<Tensor>("value"); !readable_on(s.device, value)) s.preloaded = value.to(s.device);
    if (n.op->has(kRandom)) s.run_counter = num_counted++;
    if (n.op->prepare) {
      try {
        s.prepared = n.op->prepare(n.attrs, static_cast<int>(n.inputs.size()));
      } catch (const Error&) {
        // Left unprepared: the kernel meets the same attributes when it runs and reports them
        // with the node's context, as it would without preparation.
      }
    }
    s.first_output = num_values_;
    s.num_outputs = static_cast<int32_t>(n.outputs.size());
    num_values_ += s.num_outputs;
    for (const TensorMeta& m : n.outputs) s.static_shapes &= m.shape.is_fully_defined();
    plan_index[static_cast<size_t>(id)] = static_cast<int32_t>(plan_.size());
    plan_.push_back(std::move(s));
  }
  if (num_counted > 0) {
    run_counts_.reset(new std::atomic<uint64_t>[static_cast<size_t>(num_counted)]);
    for (int32_t i = 0; i < num_counted; ++i) run_counts_[i].store(0, std::memory_order_relaxed);
  }
  value_readers_.assign(static_cast<size_t>(num_values_), 0);
  auto value_of = [&](const Endpoint& e) {
    if (auto it = fed.find(e); it != fed.end()) return it->second;
    return plan_[static_cast<size_t>(plan_index[static_cast<size_t>(e.node)])].first_output + e.index;
  };
  for (size_t i = 0; i < plan_.size(); ++i) {
    Step& s = plan_[i];
    const Node& n = *s.node;
    for (const Endpoint& e : n.inputs) {
      int32_t v = value_of(e);
      s.inputs.push_back(v);
      ++value_readers_[static_cast<size_t>(v)];
      if (!fed.contains(e)) {
        plan_[static_cast<size_t>(plan_index[static_cast<size_t>(e.node)])].successors.push_back(static_cast<int32_t>(i));
        ++s.pending;
      }
    }
    for (int32_t c : n.control_inputs) {
      plan_[static_cast<size_t>(plan_index[static_cast<size_t>(c)])].successors.push_back(static_cast<int32_t>(i));
      ++s.pending;
    }
    // An elementwise op may write over an input of its output's dtype and shape; whether the
    // input has no other reader is decided at run time.
    if (n.op->has(kElementwise) && s.static_shapes && s.num_outputs == 1) {
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const TensorMeta& in = g.meta(n.inputs[k]);
        if (in.dtype == n.outputs[0].dtype && in.shape == n.outputs[0].shape) {
          s.reuse_input = static_cast<int32_t>(k);
          break;
        }
      }
    }
    if (s.pending == 0) initial_ready_.push_back(static_cast<int32_t>(i));
  }
  for (const Endpoint& e : spec_.fetches) {
    int32_t v = value_of(e);
    fetch_values_.push_back(v);
    ++value_readers_[static_cast<size_t>(v)];
  }

  // Parallel only pays when two big nodes can run at once (look for a level, the longest path from
  // the sources, holding two nodes with large or unknown outputs) and neither fills the intra-op
  // pool by itself. A node of kFillsPool elements per pool thread splits into a chunk per thread
  // even when each element costs an add (the kernels' cheapest grain), and matmuls and
  // convolutions split by rows anyway: a second such node beside it only shares the same cores,
  // and costs their caches and more threads than cores. On two cores (a pool of two threads,
  // where every big node fills it) running such nodes one at a time made ResNet-20's training
  // step 80 -> 76 ms, nanoGPT's 29 -> 27.5 ms, and a convolution's three passes 57 -> 53 ms.
  constexpr int64_t kFillsPool = int64_t{1} << 15;
  const int64_t fills_pool = kFillsPool * cpu_device()->pool().num_threads();
  std::vector<int32_t> level(plan_.size(), 0);
  std::map<int32_t, int> big_per_level;
  for (size_t i = 0; i < plan_.size(); ++i) {
    for (int32_t succ : plan_[i].successors)
      level[static_cast<size_t>(succ)] = std::max(level[static_cast<size_t>(succ)], level[i] + 1);
    int64_t elements = 0;
    for (const TensorMeta& m : plan_[i].node->outputs) {
      int64_t n = m.shape.num_elements();
      elements += n < 0 ? (int64_t{1} << 30) : n;
    }
    if (elements < (int64_t{1} << 16)) continue;
    has_big_nodes_ = true;
    if (elements >= fills_pool) continue;
    if (++big_per_level[level[i]] >= 2 && parallelism == Parallelism::kAuto) parallel_ = true;
  }
  if (parallelism == Parallelism::kParallel) parallel_ = true;
}

Executor::~Executor() { delete spare_.load(); }

int Executor::num_planned_nodes() const { return static_cast<int>(plan_.size()); }

std::unique_ptr<Executor> Executor::for_function(std::shared_ptr<const GraphIR> body, Device* device) {
  ExecutorSpec spec;
  spec.device = device;
  for (int32_t a : body->args) spec.feeds.push_back({a, 0});
  spec.fetches = body->results;
  // A nested If or While whose branch prints or assigns must run even if its outputs are unused.
  for (int32_t id : body->node_ids())
    if (has_side_effect(body->node(id))) spec.targets.push_back(id);
  return std::make_unique<Executor>(std::move(body), std::move(spec));
}

const Executor& Executor::body_executor(const GraphIR& body, Device& device) const {
  std::lock_guard lock(bodies_mu_);
  auto& slot = bodies_[{&body, &device}];
  // The subgraph is owned by the node attribute that names it, which outlives this executor's
  // graph_, so a non-owning pointer is enough.
  if (!slot) slot = for_function(std::shared_ptr<const GraphIR>(std::shared_ptr<const GraphIR>(), &body), &device);
  return *slot;
}

bool feed_matches(const TensorMeta& m, const Tensor& value) {
  if (!value.defined() || value.is_symbolic() || value.dtype() != m.dtype || value.rank() != m.shape.rank()) return false;
  for (int64_t d = 0; d < m.shape.rank(); ++d)
    if (m.shape[d] >= 0 && m.shape[d] != value.shape()[d]) return false;
  return true;
}

void throw_bad_feed(const std::string& name, const TensorMeta& m, const Tensor& value) {
  if (!value.defined()) throw InvalidArgument("[feed] '" + name + "' is fed an empty Tensor handle");
  if (value.is_symbolic()) throw InvalidArgument("[feed] '" + name + "' is fed a symbolic tensor");
  throw InvalidArgument("[feed] '" + name + "' expects " + std::string(dtype_name(m.dtype)) + m.shape.to_string() +
                        ", got " + std::string(dtype_name(value.dtype())) + value.shape().to_string());
}

void Executor::check_feed(size_t i, const Tensor& value) const {
  const Endpoint& e = spec_.feeds[i];
  const TensorMeta& m = graph_->meta(e);
  // The name is only built when something is wrong: this runs on every call.
  if (!feed_matches(m, value)) throw_bad_feed(graph_->endpoint_name(e), m, value);
}

template <bool kConcurrent>
void Executor::run_step(const Step& s, RunState& st, std::vector<Tensor>& scratch) const {
  const Node& n = *s.node;
  const size_t ni = s.inputs.size();
  const size_t no = static_cast<size_t>(s.num_outputs);
  scratch.resize(ni + no);  // every slot is empty between steps
  std::span<Tensor> ins(scratch.data(), ni);
  std::span<Tensor> outs(scratch.data() + ni, no);
  auto clear_scratch = [&] {
    for (Tensor& t : ins) forget_borrowed(t);
    for (Tensor& t : outs) t = Tensor();
  };
  try {
    // A fed value belongs to the caller: never written over.
    bool reuse = false;
    if (s.reuse_input >= 0) {
      int32_t v = s.inputs[static_cast<size_t>(s.reuse_input)];
      reuse = v >= num_feeds_ && st.readers[v].load(std::memory_order_acquire) == 1 &&
              exclusively_owned(st.values[static_cast<size_t>(v)], 0);
    }
    // The kernel reads its inputs through borrowed handles: the value table holds them until
    // this step's reads are counted below.
    for (size_t i = 0; i < ni; ++i) ins[i] = borrowed(st.values[static_cast<size_t>(s.inputs[i])]);
    const OpDef& op = *n.op;
    const std::span<const Tensor> cins(ins.data(), ni);
    // Off, the timeline costs this one relaxed load per node.
    const bool recording = timeline::enabled();
    int64_t timeline_start = 0;
    if (recording) [[unlikely]]
      timeline_start = timeline::now_us();
    const uint64_t execution =
        s.run_counter < 0 ? 0 : run_counts_[s.run_counter].fetch_add(1, std::memory_order_relaxed);
    if (s.preloaded.defined()) {
      outs[0] = s.preloaded;
    } else if (s.static_shapes) {
      run_kernel(op, s.fn, *s.device, n.attrs, cins, outs, [&](size_t i) -> const TensorMeta& { return n.outputs[i]; },
                 &st.ctx, reuse ? s.reuse_input : -1, execution, s.prepared.get());
    } else {
      InferContext ic(op, cins, n.attrs);
      if (!op.has(kSetsOutputs)) op.infer(ic);
      run_kernel(op, s.fn, *s.device, n.attrs, cins, outs,
                 [&](size_t i) -> const TensorMeta& { return ic.output(static_cast<int>(i)); }, &st.ctx,
                 reuse ? s.reuse_input : -1, execution, s.prepared.get());
    }
    if (recording) [[unlikely]]
      record_on_timeline(n, false, *s.track, timeline_start);
  } catch (...) {
    clear_scratch();
    rethrow_for_node(n);
  }
  commit_step<kConcurrent>(s, st, ins, outs);
}

template <bool kConcurrent>
void Executor::commit_step(const Step& s, RunState& st, std::span<Tensor> ins, std::span<Tensor> outs) const {
  for (size_t i = 0; i < outs.size(); ++i) {
    const int32_t v = s.first_output + static_cast<int32_t>(i);
    if (!outs[i].defined()) {
      for (Tensor& t : ins) forget_borrowed(t);
      for (Tensor& t : outs) t = Tensor();
      throw Internal("[executor] " + s.node->describe() + " produced no output " + std::to_string(i));
    }
    if (value_readers_[static_cast<size_t>(v)] > 0) st.values[static_cast<size_t>(v)] = std::move(outs[i]);
    else outs[i] = Tensor();
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    forget_borrowed(ins[i]);
    const int32_t v = s.inputs[i];
    if (count_last_read<kConcurrent>(st.readers[v])) st.release(*this, v);
  }
}

template void Executor::run_step<true>(const Step&, RunState&, std::vector<Tensor>&) const;
template void Executor::commit_step<true>(const Step&, RunState&, std::span<Tensor>, std::span<Tensor>) const;

void Executor::run_sequential(RunState& st) const {
  for (const Step& s : plan_) run_step<false>(s, st, st.scratch);
}

void Executor::append_in_flight(const RunState& st, int64_t now_ms, std::vector<RunningStep::InFlight>& out) const {
  for (size_t i = 0; i < plan_.size(); ++i) {
    const int64_t started = st.started_ms[i].load(std::memory_order_relaxed);
    if (started == RunState::kNotRunning) continue;
    const Step& s = plan_[i];
    const bool waiting = s.async && st.async[static_cast<size_t>(s.async_slot)].waiting != nullptr;
    out.push_back({s.node->describe(), s.node->type(), std::max<int64_t>(0, now_ms - started), waiting});
  }
}

void Executor::run_sequential_watched(RunState& st, const StepOptions& step) const {
  std::atomic<bool> ended{false};
  std::exception_ptr why;  // written before `ended` is set
  StallWatch watch(
      {.owner = step.owner, .step_id = step.step_id, .limits = {step.stall_warning, step.stall_timeout}},
      [&] {
        std::vector<RunningStep::InFlight> out;
        append_in_flight(st, coarse_now_ms(), out);
        return out;
      },
      [&](std::exception_ptr error) {
        why = std::move(error);
        ended.store(true, std::memory_order_release);
      });
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (ended.load(std::memory_order_acquire)) std::rethrow_exception(why);
    st.started_ms[i].store(coarse_now_ms(), std::memory_order_relaxed);
    try {
      run_step<false>(plan_[i], st, st.scratch);
    } catch (...) {
      st.started_ms[i].store(RunState::kNotRunning, std::memory_order_relaxed);
      throw;
    }
    st.started_ms[i].store(RunState::kNotRunning, std::memory_order_relaxed);
  }
}

void Executor::check_feed_count(size_t count) const {
  if (count != spec_.feeds.size())
    throw InvalidArgument("[executor] expected " + std::to_string(spec_.feeds.size()) + " feeds, got " +
                          std::to_string(count));
}

std::vector<Tensor> Executor::run(std::span<const Tensor> feeds) const {
  check_feed_count(feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) check_feed(i, feeds[i]);
  return run_checked_feeds(feeds);
}

std::unique_ptr<Executor::RunState> Executor::take_run_state(std::span<const Tensor> feeds,
                                                              const StepOptions& options) const {
  // One run state is kept for reuse, so that a call of a small graph allocates almost nothing;
  // a concurrent run finding it taken makes its own.
  std::unique_ptr<RunState> st(spare_.exchange(nullptr, std::memory_order_acquire));
  if (!st) st = std::make_unique<RunState>(*this);
  st->reset(*this);
  st->ctx.set_step(options);
  // The caller's span outlives the run: its tensors are borrowed, not counted.
  for (size_t i = 0; i < feeds.size(); ++i) st->values[i] = borrowed(feeds[i]);
  return st;
}

void Executor::give_back(std::unique_ptr<RunState> st) const {
  for (int32_t v = 0; v < num_values_; ++v) st->release(*this, v);
  for (RunState::AsyncSlot& slot : st->async) {
    for (Tensor& t : slot.io) t = Tensor();
    slot.kc.reset();
    slot.waiting = nullptr;
  }
  RunState* expected = nullptr;
  if (spare_.compare_exchange_strong(expected, st.get(), std::memory_order_release)) (void)st.release();
}

std::vector<Tensor> Executor::collect_fetches(RunState& st) const {
  // Every step is done: the counts are this thread's alone. A value's last fetch moves it out.
  std::vector<Tensor> out;
  out.reserve(fetch_values_.size());
  for (int32_t v : fetch_values_) {
    Tensor& value = st.values[static_cast<size_t>(v)];
    if (count_last_read<false>(st.readers[v]) && v >= num_feeds_) out.push_back(std::move(value));
    else out.push_back(value);
  }
  return out;
}

std::vector<Tensor> Executor::run_checked_feeds(std::span<const Tensor> feeds, const StepOptions& step) const {
  check_feed_count(feeds.size());
  // A chain of synchronous kernels runs in plan order on this thread: the cheapest way there is.
  if (num_async_ == 0 && (!parallel_ || InterOpPool::in_pool_thread())) {
    std::unique_ptr<RunState> st = take_run_state(feeds, step);
    struct GiveBack {
      const Executor* exec;
      std::unique_ptr<RunState>& st;
      ~GiveBack() { exec->give_back(std::move(st)); }
    } give_back{this, st};
    if (step.stall_warning.count() > 0 || step.stall_timeout.count() > 0) run_sequential_watched(*st, step);
    else run_sequential(*st);
    return collect_fetches(*st);
  }
  std::vector<Tensor> out;
  const Part part{this, feeds, &out};
  run_together(std::span<const Part>(&part, 1), step);
  return out;
}

}  // namespace weft
