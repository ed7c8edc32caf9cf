#include "scheduler/executor.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <optional>

#include "scheduler/inter_op_pool.h"

namespace weft {

struct Executor::Step {
  const Node* node = nullptr;
  KernelFn fn = nullptr;
  DType kernel_dtype = DType::Float32;
  std::vector<int32_t> inputs;  // value ids, one per input slot
  int32_t first_output = 0;     // value ids first_output .. first_output + num_outputs - 1
  int32_t num_outputs = 0;
  bool static_shapes = true;    // every output shape known: no inference at run time
  int32_t reuse_input = -1;     // input slot whose buffer output 0 may take over
  std::vector<int32_t> successors;  // plan indices, one entry per edge (data or control)
  int32_t pending = 0;              // edges into this step from planned steps
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
  std::vector<Tensor> call(const GraphIR& body, std::span<const Tensor> args) override {
    return exec_.body_executor(body).run(args);
  }

 private:
  const Executor& exec_;
};

struct Executor::RunState {
  explicit RunState(const Executor& exec)
      : values(static_cast<size_t>(exec.num_values_)),
        readers(new std::atomic<int32_t>[static_cast<size_t>(exec.num_values_)]),
        pending(new std::atomic<int32_t>[exec.plan_.size()]),
        ctx(exec) {}
  // Relaxed stores are plain moves; a parallel run hands its work to the pool through a mutex,
  // which orders them before any worker's reads.
  void reset(const Executor& exec) {
    for (int32_t v = 0; v < exec.num_values_; ++v)
      readers[v].store(exec.value_readers_[static_cast<size_t>(v)], std::memory_order_relaxed);
    for (size_t s = 0; s < exec.plan_.size(); ++s) pending[s].store(exec.plan_[s].pending, std::memory_order_relaxed);
    failed.store(false, std::memory_order_relaxed);
    error = nullptr;
    outstanding = 0;
  }
  // Drops the run's hold on value v: a fed value is only borrowed from the caller's span.
  void release(const Executor& exec, int32_t v) {
    Tensor& t = values[static_cast<size_t>(v)];
    if (v < exec.num_feeds_) t.forget_borrowed();
    else t = Tensor();
  }
  std::vector<Tensor> values;
  std::vector<Tensor> scratch;  // a step's inputs and outputs (sequential runs)
  std::unique_ptr<std::atomic<int32_t>[]> readers;  // reads left before the value is released
  std::unique_ptr<std::atomic<int32_t>[]> pending;
  Context ctx;
  // Parallel runs only.
  std::mutex mu;
  std::condition_variable done;
  int outstanding = 0;
  std::atomic<bool> failed{false};
  std::exception_ptr error;
};

namespace {

DType choose_kernel_dtype(const Node& n, const GraphIR& g) {
  const OpDef& op = *n.op;
  if (op.kernel_dtype_input >= 0 && op.kernel_dtype_input < static_cast<int>(n.inputs.size()))
    return g.meta(n.inputs[static_cast<size_t>(op.kernel_dtype_input)]).dtype;
  return n.outputs.empty() ? DType::Float32 : n.outputs[0].dtype;
}

bool exclusively_owned(const Tensor& t, int32_t extra_handles) {
  const TensorImpl* impl = t.impl_or_null();
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

[[noreturn]] void rethrow_for(const Node& n) {
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

}  // namespace

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
  for (int32_t id : g.topological_order()) {
    if (!needed[static_cast<size_t>(id)]) continue;
    const Node& n = g.node(id);
    if (n.type() == "Placeholder")
      throw InvalidArgument("[executor] placeholder '" + n.name + "' (" + std::string(dtype_name(n.outputs[0].dtype)) +
                            n.outputs[0].shape.to_string() + ") must be fed: the fetched values depend on it");
    Step s;
    s.node = &n;
    s.kernel_dtype = choose_kernel_dtype(n, g);
    s.fn = n.op->kernel(DeviceType::CPU, s.kernel_dtype);
    if (!s.fn && !n.op->has(kForwardsInput))
      throw InvalidArgument("[" + n.op->display + "] has no CPU kernel for dtype " +
                            std::string(dtype_name(s.kernel_dtype)) + " [" + n.describe() + "]");
    s.first_output = num_values_;
    s.num_outputs = static_cast<int32_t>(n.outputs.size());
    num_values_ += s.num_outputs;
    for (const TensorMeta& m : n.outputs) s.static_shapes &= m.shape.is_fully_defined();
    plan_index[static_cast<size_t>(id)] = static_cast<int32_t>(plan_.size());
    plan_.push_back(std::move(s));
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

  // Parallel only pays when two big nodes can run at once: look for a level (longest path from
  // the sources) holding two nodes with large or unknown outputs.
  if (parallelism == Parallelism::kParallel) {
    parallel_ = true;
  } else if (parallelism == Parallelism::kAuto) {
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
      if (elements >= (int64_t{1} << 16) && ++big_per_level[level[i]] >= 2) parallel_ = true;
    }
  }
}

Executor::~Executor() { delete spare_.load(); }

int Executor::num_planned_nodes() const { return static_cast<int>(plan_.size()); }

std::unique_ptr<Executor> Executor::for_function(std::shared_ptr<const GraphIR> body) {
  ExecutorSpec spec;
  for (int32_t a : body->args) spec.feeds.push_back({a, 0});
  spec.fetches = body->results;
  // A nested If or While whose branch prints or assigns must run even if its outputs are unused.
  for (int32_t id : body->node_ids())
    if (has_side_effect(body->node(id))) spec.targets.push_back(id);
  return std::make_unique<Executor>(std::move(body), std::move(spec));
}

const Executor& Executor::body_executor(const GraphIR& body) const {
  std::lock_guard lock(bodies_mu_);
  auto& slot = bodies_[&body];
  // The subgraph is owned by the node attribute that names it, which outlives this executor's
  // graph_, so a non-owning pointer is enough.
  if (!slot) slot = for_function(std::shared_ptr<const GraphIR>(std::shared_ptr<const GraphIR>(), &body));
  return *slot;
}

void Executor::check_feed(size_t i, const Tensor& value) const {
  const Endpoint& e = spec_.feeds[i];
  const TensorMeta& m = graph_->meta(e);
  // The name is only built when something is wrong: this runs on every call.
  if (!value.defined()) throw InvalidArgument("[feed] '" + graph_->endpoint_name(e) + "' is fed an empty Tensor handle");
  if (value.is_symbolic()) throw InvalidArgument("[feed] '" + graph_->endpoint_name(e) + "' is fed a symbolic tensor");
  bool compatible = value.dtype() == m.dtype && value.rank() == m.shape.rank();
  for (int64_t d = 0; compatible && d < m.shape.rank(); ++d) compatible = m.shape[d] < 0 || m.shape[d] == value.shape()[d];
  if (!compatible)
    throw InvalidArgument("[feed] '" + graph_->endpoint_name(e) + "' expects " + std::string(dtype_name(m.dtype)) +
                          m.shape.to_string() + ", got " + std::string(dtype_name(value.dtype())) +
                          value.shape().to_string());
}

template <bool kConcurrent>
void Executor::run_step(const Step& s, RunState& st, std::vector<Tensor>& scratch) const {
  const Node& n = *s.node;
  const OpDef& op = *n.op;
  const size_t ni = s.inputs.size();
  const size_t no = static_cast<size_t>(s.num_outputs);
  scratch.resize(ni + no);  // every slot is empty between steps
  std::span<Tensor> ins(scratch.data(), ni);
  std::span<Tensor> outs(scratch.data() + ni, no);
  auto clear_scratch = [&] {
    for (Tensor& t : ins) t.forget_borrowed();
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
    for (size_t i = 0; i < ni; ++i) ins[i] = Tensor::borrowed(st.values[static_cast<size_t>(s.inputs[i])]);
    Device* dev = cpu_device();
    if (!op.has(kSetsOutputs)) {
      std::optional<InferContext> ic;
      if (!s.static_shapes) {
        ic.emplace(op, std::span<const Tensor>(ins.data(), ni), n.attrs);
        op.infer(*ic);
      }
      for (size_t i = 0; i < no; ++i) {
        const TensorMeta& m = ic ? ic->output(static_cast<int>(i)) : n.outputs[i];
        if (i == 0 && op.has(kForwardsInput)) outs[0] = ins[0].view(m.shape);
        else if (i == 0 && reuse) outs[0] = ins[static_cast<size_t>(s.reuse_input)];
        else outs[i] = Tensor::empty(m.dtype, m.shape, dev);
      }
    }
    if (s.fn) {
      KernelContext kc{op, std::span<const Tensor>(ins.data(), ni), outs, n.attrs, *dev, &st.ctx};
      s.fn(kc);
    }
  } catch (...) {
    clear_scratch();
    rethrow_for(n);
  }
  for (size_t i = 0; i < no; ++i) {
    const int32_t v = s.first_output + static_cast<int32_t>(i);
    if (!outs[i].defined()) {
      clear_scratch();
      throw Internal("[executor] " + n.describe() + " produced no output " + std::to_string(i));
    }
    if (value_readers_[static_cast<size_t>(v)] > 0) st.values[static_cast<size_t>(v)] = std::move(outs[i]);
    else outs[i] = Tensor();
  }
  for (size_t i = 0; i < ni; ++i) {
    ins[i].forget_borrowed();
    const int32_t v = s.inputs[i];
    if (count_last_read<kConcurrent>(st.readers[v])) st.release(*this, v);
  }
}

void Executor::run_sequential(RunState& st) const {
  for (const Step& s : plan_) run_step<false>(s, st, st.scratch);
}

void Executor::run_parallel(RunState& st) const {
  // A worker runs one ready step, keeps one newly ready successor for itself and hands the rest
  // to the pool; `outstanding` counts workers, so the run is over when it drops to zero.
  std::function<void(int32_t)> work = [&](int32_t index) {
    std::vector<Tensor> scratch;
    std::vector<int32_t> ready;
    while (index >= 0 && !st.failed.load(std::memory_order_relaxed)) {
      const Step& s = plan_[static_cast<size_t>(index)];
      try {
        run_step<true>(s, st, scratch);
      } catch (...) {
        std::lock_guard lock(st.mu);
        if (!st.error) st.error = std::current_exception();
        st.failed = true;
        break;
      }
      ready.clear();
      for (int32_t succ : s.successors)
        if (st.pending[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) ready.push_back(succ);
      index = ready.empty() ? -1 : ready[0];
      if (ready.size() > 1) {
        {
          std::lock_guard lock(st.mu);
          st.outstanding += static_cast<int>(ready.size() - 1);
        }
        for (size_t k = 1; k < ready.size(); ++k) inter_op_pool().submit([&work, r = ready[k]] { work(r); });
      }
    }
    std::lock_guard lock(st.mu);
    if (--st.outstanding == 0) st.done.notify_all();
  };
  {
    std::lock_guard lock(st.mu);
    st.outstanding = static_cast<int>(initial_ready_.size());
  }
  if (initial_ready_.empty()) return;
  for (size_t k = 1; k < initial_ready_.size(); ++k)
    inter_op_pool().submit([&work, r = initial_ready_[k]] { work(r); });
  work(initial_ready_[0]);
  std::unique_lock lock(st.mu);
  st.done.wait(lock, [&] { return st.outstanding == 0; });
  if (st.error) std::rethrow_exception(st.error);
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

std::vector<Tensor> Executor::run_checked_feeds(std::span<const Tensor> feeds) const {
  check_feed_count(feeds.size());
  // One run state is kept for reuse, so that a call of a small graph allocates almost nothing;
  // a concurrent run finding it taken makes its own.
  std::unique_ptr<RunState> st(spare_.exchange(nullptr, std::memory_order_acquire));
  if (!st) st = std::make_unique<RunState>(*this);
  st->reset(*this);
  struct GiveBack {
    const Executor* exec;
    std::unique_ptr<RunState>& st;
    ~GiveBack() {
      for (int32_t v = 0; v < exec->num_values_; ++v) st->release(*exec, v);
      RunState* expected = nullptr;
      if (exec->spare_.compare_exchange_strong(expected, st.get(), std::memory_order_release)) st.release();
    }
  } give_back{this, st};
  // The caller's span outlives the run: its tensors are borrowed, not counted.
  for (size_t i = 0; i < feeds.size(); ++i) st->values[i] = Tensor::borrowed(feeds[i]);
  if (parallel_ && !InterOpPool::in_pool_thread()) run_parallel(*st);
  else run_sequential(*st);
  // Every step is done: the counts are this thread's alone. A value's last fetch moves it out.
  std::vector<Tensor> out;
  out.reserve(fetch_values_.size());
  for (int32_t v : fetch_values_) {
    Tensor& value = st->values[static_cast<size_t>(v)];
    if (count_last_read<false>(st->readers[v]) && v >= num_feeds_) out.push_back(std::move(value));
    else out.push_back(value);
  }
  return out;
}

}  // namespace weft
