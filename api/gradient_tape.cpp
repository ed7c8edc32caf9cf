#include "api/gradient_tape.h"

#include <algorithm>
#include <memory>

#include "api/context.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

// Every live tape of this thread, innermost last, for the variable-read hook.
thread_local std::vector<GradientTape*> t_tapes;

void on_read(const Variable& v, const Tensor& value) {
  for (GradientTape* tape : t_tapes) tape->on_variable_read(v, value);
}

bool differentiable_dtype(DType d) { return is_floating(d); }

}  // namespace

struct GradientTape::Entry {
  const OpDef* op;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
};

GradientTape::GradientTape(bool persistent) : persistent_(persistent) {
  set_variable_read_hook(on_read);
  t_tapes.push_back(this);
  install();
}

GradientTape::~GradientTape() {
  uninstall();
  t_tapes.erase(std::remove(t_tapes.begin(), t_tapes.end(), this), t_tapes.end());
}

void GradientTape::install() {
  if (installed_) return;
  eager_context().observers.push_back(this);
  installed_ = true;
}

void GradientTape::uninstall() {
  if (!installed_) return;
  auto& obs = eager_context().observers;
  obs.erase(std::remove(obs.begin(), obs.end(), this), obs.end());
  installed_ = false;
}

void GradientTape::stop_recording() { uninstall(); }
void GradientTape::resume() {
  if (!used_ || persistent_) install();
}

size_t GradientTape::num_recorded_ops() const { return entries_.size(); }

bool GradientTape::tracked(const Tensor& t) const { return tracked_.count(tensor_impl_or_null(t)) != 0; }

void GradientTape::track(const Tensor& t) { tracked_.insert(tensor_impl(t)); }

void GradientTape::watch(const Tensor& t) {
  if (!t.defined()) throw InvalidArgument("[GradientTape] cannot watch an empty Tensor handle");
  watched_.push_back(t);
  track(t);
}

void GradientTape::watch(const Variable& v) {
  if (!v.defined()) throw InvalidArgument("[GradientTape] cannot watch an uninitialised Variable");
  Tensor value = v.state()->value;  // read without the hook: watching is explicit here
  variable_reads_[v.id()].push_back(value);
  track(value);
}

void GradientTape::on_variable_read(const Variable& v, const Tensor& value) {
  if (!installed_ || !v.trainable()) return;
  auto& reads = variable_reads_[v.id()];
  for (const Tensor& r : reads)
    if (r.same_as(value)) return;
  reads.push_back(value);
  track(value);
}

void GradientTape::on_op(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                         const Attrs& attrs) {
  bool relevant = false;
  for (const Tensor& t : inputs) relevant |= tracked(t);
  if (!relevant || op.has(kNotDifferentiable)) return;
  entries_.push_back({&op, {inputs.begin(), inputs.end()}, {outputs.begin(), outputs.end()}, attrs});
  for (const Tensor& t : outputs) track(t);
}

std::vector<Tensor> GradientTape::backprop(const Tensor& target, const std::vector<std::vector<Tensor>>& sources) {
  if (used_ && !persistent_)
    throw FailedPrecondition(
        "[GradientTape] gradient() was already called on this non-persistent tape; construct it as "
        "GradientTape(/*persistent=*/true) to ask more than once");
  if (!target.defined()) throw InvalidArgument("[GradientTape] target is an empty Tensor handle");
  register_builtin_gradients();
  used_ = true;
  // This tape stops recording while it differentiates; outer tapes keep recording, which is what
  // makes nested tapes give higher-order gradients.
  bool was_installed = installed_;
  uninstall();

  std::unordered_map<const TensorImpl*, Tensor> grads;
  auto accumulate = [&](const Tensor& t, const Tensor& g) {
    auto [it, fresh] = grads.try_emplace(tensor_impl(t), g);
    if (!fresh) it->second = add(it->second, g);
  };
  if (differentiable_dtype(target.dtype())) accumulate(target, ones_like(target));

  for (auto e = entries_.rbegin(); e != entries_.rend(); ++e) {
    bool any = false;
    std::vector<Tensor> out_grads(e->outputs.size());
    std::unique_ptr<bool[]> arrived(new bool[e->outputs.size()]);
    for (size_t i = 0; i < e->outputs.size(); ++i) {
      auto it = grads.find(tensor_impl(e->outputs[i]));
      arrived[i] = it != grads.end();
      if (arrived[i]) {
        out_grads[i] = it->second;
        any = true;
      }
    }
    if (!any) continue;
    GradFn fn = find_gradient(*e->op);
    if (!fn) {
      if (was_installed) install();
      throw Unimplemented("[GradientTape] no gradient is registered for op " + e->op->name + " (" + e->op->display +
                          ")");
    }
    for (size_t i = 0; i < out_grads.size(); ++i)
      if (!out_grads[i].defined()) out_grads[i] = zeros_like(e->outputs[i]);
    std::unique_ptr<bool[]> wanted(new bool[e->inputs.size()]);
    for (size_t i = 0; i < e->inputs.size(); ++i)
      wanted[i] = differentiable_dtype(e->inputs[i].dtype()) && tracked(e->inputs[i]);
    GradContext ctx{*e->op, e->inputs, e->outputs, out_grads, e->attrs, {wanted.get(), e->inputs.size()}};
    ctx.arrived = {arrived.get(), e->outputs.size()};
    std::vector<Tensor> in_grads = fn(ctx);
    for (size_t i = 0; i < in_grads.size() && i < e->inputs.size(); ++i) {
      if (in_grads[i].defined() && wanted[i]) accumulate(e->inputs[i], in_grads[i]);
    }
  }

  std::vector<Tensor> result;
  for (const auto& group : sources) {
    Tensor sum;
    for (const Tensor& s : group) {
      auto it = grads.find(tensor_impl(s));
      if (it == grads.end()) continue;
      sum = sum.defined() ? add(sum, it->second) : it->second;
    }
    result.push_back(sum);
  }
  if (!persistent_) {
    entries_.clear();
    entries_.shrink_to_fit();
    watched_.clear();
    tracked_.clear();
    variable_reads_.clear();
  } else if (was_installed) {
    install();
  }
  return result;
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const std::source_location& loc) {
  CallerLocation at(loc);
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& s : sources) {
    if (!s.defined()) throw InvalidArgument("[GradientTape] a source is an empty Tensor handle");
    groups.push_back({s});
  }
  std::vector<Tensor> g = backprop(target, groups);
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].defined()) g[i] = zeros_like(sources[i]);
  return g;
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Variable>& sources,
                                           const std::source_location& loc) {
  CallerLocation at(loc);
  std::vector<std::vector<Tensor>> groups;
  for (const Variable& v : sources) {
    if (!v.defined()) throw InvalidArgument("[GradientTape] a source is an uninitialised Variable");
    auto it = variable_reads_.find(v.id());
    groups.push_back(it == variable_reads_.end() ? std::vector<Tensor>{} : it->second);
  }
  std::vector<Tensor> g = backprop(target, groups);
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].defined()) g[i] = zeros(sources[i].shape(), sources[i].dtype());
  return g;
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source, const std::source_location& loc) {
  return gradient(target, std::vector<Tensor>{source}, loc)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source, const std::source_location& loc) {
  return gradient(target, std::vector<Variable>{source}, loc)[0];
}

}  // namespace weft
