#include "api/optim/optimizers.h"

#include <cmath>
#include <optional>

#include "api/devices.h"
#include "api/dispatch.h"
#include "api/distribute/replica_context.h"
#include "api/graph_builder.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"

namespace weft::optim {

// The step count and the learning rate live in variables too: a traced training step reads them
// at run time (an attribute would freeze the values seen while tracing), and eager and traced
// steps can be mixed freely.
class OptimizerImpl {
 public:
  explicit OptimizerImpl(double lr) : lr_(lr) {
    if (!(lr >= 0) || !std::isfinite(lr))
      throw InvalidArgument("[optimizer] learning rate must be a finite non-negative number, got " + std::to_string(lr));
    step_ = Variable(constant(0.0), "iterations", /*trainable=*/false);
    lr_var_ = Variable(constant(lr), "learning_rate", /*trainable=*/false);
  }
  virtual ~OptimizerImpl() = default;
  // Eager: `step` is the step number and the rate is an attribute. Traced: `traced_step` is the
  // step-count tensor and the rate is computed in the graph.
  virtual void update(Variable& var, const Tensor& grad, int64_t step, const Tensor& traced_step,
                      const SourceLocation& loc) = 0;

  // The learning rate as a float64 scalar tensor of the graph being traced.
  Tensor traced_lr(const SourceLocation& loc) { return lr_var_.value(loc); }

  using SlotKey = std::pair<const VariableState*, std::string>;

  // In a TF1 Graph a new slot's initialiser is a node of the graph, placed at `loc`.
  Variable& slot_for(const Variable& var, const std::string& slot, const SourceLocation& loc) {
    auto key = std::make_pair(var.id(), slot);
    auto it = slots_.find(key);
    if (it != slots_.end()) return it->second;
    // A slot lives with its variable (its update reads both), as TensorFlow colocates them.
    std::optional<DeviceScope> with_var;
    if (!var.state()->device.empty()) with_var.emplace(var.state()->device);
    Variable s(zeros(var.shape(), var.dtype(), loc), var.name() + "/" + slot, /*trainable=*/false, loc);
    if (auto p = pending_.find(key); p != pending_.end()) {
      s.restore(p->second.second);
      pending_.erase(p);
    }
    order_.push_back(s);
    order_keys_.push_back(key);
    return slots_.emplace(key, s).first->second;
  }

  double lr_;
  Variable step_;    // float64 scalar
  Variable lr_var_;  // float64 scalar
  std::map<SlotKey, Variable> slots_;
  std::vector<Variable> order_;
  std::vector<SlotKey> order_keys_;
  // Restored values of slots not created yet; the Variable keeps its state (and so the key's
  // address) alive until then.
  std::map<SlotKey, std::pair<Variable, Tensor>> pending_;
};

namespace {

class SgdImpl final : public OptimizerImpl {
 public:
  SgdImpl(double lr, double momentum, bool nesterov) : OptimizerImpl(lr), momentum_(momentum), nesterov_(nesterov) {
    if (!(momentum >= 0 && momentum <= 1))
      throw InvalidArgument("[SGD] momentum must be in [0, 1], got " + std::to_string(momentum));
  }
  void update(Variable& var, const Tensor& grad, int64_t, const Tensor& traced_step,
              const SourceLocation& loc) override {
    const bool traced = traced_step.defined();
    if (momentum_ == 0) {
      static const OpDef& op = op_def("ApplyGradientDescent");
      std::vector<Tensor> ins{var.value_for_update(loc), grad};
      if (traced) ins.push_back(traced_lr(loc));
      dispatch(op, ins, traced ? Attrs{} : Attrs{{"lr", lr_}}, loc);
    } else {
      static const OpDef& op = op_def("ApplyMomentum");
      Variable& acc = slot_for(var, "momentum", loc);
      std::vector<Tensor> ins{var.value_for_update(loc), acc.value_for_update(loc), grad};
      Attrs attrs{{"momentum", momentum_}, {"nesterov", nesterov_}};
      if (traced) ins.push_back(traced_lr(loc));
      else attrs.set("lr", lr_);
      dispatch(op, ins, attrs, loc);
    }
  }
  double momentum_;
  bool nesterov_;
};

class AdamImpl final : public OptimizerImpl {
 public:
  AdamImpl(double lr, double b1, double b2, double eps) : OptimizerImpl(lr), b1_(b1), b2_(b2), eps_(eps) {
    if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
      throw InvalidArgument("[Adam] beta1 and beta2 must be in [0, 1), got " + std::to_string(b1) + " and " +
                            std::to_string(b2));
    if (!(eps > 0)) throw InvalidArgument("[Adam] epsilon must be positive, got " + std::to_string(eps));
  }
  void update(Variable& var, const Tensor& grad, int64_t step, const Tensor& traced_step,
              const SourceLocation& loc) override {
    static const OpDef& op = op_def("ApplyAdam");
    Variable& m = slot_for(var, "m", loc);
    Variable& v = slot_for(var, "v", loc);
    std::vector<Tensor> ins{var.value_for_update(loc), m.value_for_update(loc), v.value_for_update(loc), grad};
    Attrs attrs{{"beta1", b1_}, {"beta2", b2_}, {"epsilon", eps_}};
    if (traced_step.defined()) {
      // The same expression, in the same order, as the eager path: traced steps match bit for bit.
      // lr * sqrt(1 - b2^t) / (1 - b1^t)
      const Tensor& t = traced_step;
      Tensor bias2 = sub(1.0, pow(constant(b2_), t, loc), loc);
      Tensor bias1 = sub(1.0, pow(constant(b1_), t, loc), loc);
      ins.push_back(div(mul(traced_lr(loc), sqrt(bias2, loc), loc), bias1, loc));
    } else {
      const double t = static_cast<double>(step);
      attrs.set("lr", lr_ * std::sqrt(1 - std::pow(b2_, t)) / (1 - std::pow(b1_, t)));
    }
    dispatch(op, ins, attrs, loc);
  }
  double b1_, b2_, eps_;
};

}  // namespace

Operation Optimizer::apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                     const SourceLocation& loc) {
  if (grads.size() != vars.size())
    throw InvalidArgument("[apply_gradients] " + std::to_string(grads.size()) + " gradients for " +
                          std::to_string(vars.size()) + " variables");
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!vars[i].defined()) throw InvalidArgument("[apply_gradients] variable " + std::to_string(i) + " is undefined");
    if (!grads[i].defined()) continue;
    if (grads[i].shape() != vars[i].shape() || grads[i].dtype() != vars[i].dtype())
      throw InvalidArgument("[apply_gradients] gradient " + std::string(dtype_name(grads[i].dtype())) +
                            grads[i].shape().to_string() + " does not match variable '" + vars[i].name() + "' " +
                            std::string(dtype_name(vars[i].dtype())) + vars[i].shape().to_string());
  }
  GraphBuilder* b = current_builder();
  // Traced for data-parallel replicas: every replica applies the gradients all-reduced over them.
  std::vector<Tensor> reduced;
  distribute::ReplicaContext* replicas = b ? distribute::current_replica_context() : nullptr;
  if (replicas) reduced = replicas->all_reduce_gradients(grads, vars, loc);
  const std::vector<Tensor>& applied = replicas ? reduced : grads;
  const size_t first_effect = b ? b->side_effects().size() : 0;
  Tensor traced_step;
  int64_t step = 0;
  if (b) {
    traced_step = impl_->step_.assign_add(constant(1.0), loc);
  } else {
    step = iterations() + 1;
    impl_->step_.assign(constant(static_cast<double>(step)), loc);
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!applied[i].defined()) continue;
    Variable v = vars[i];
    impl_->update(v, applied[i], step, traced_step, loc);
  }
  // A traced function runs its updates with every call, a cond branch or loop body with its
  // node: only a TF1 graph needs a node to run them by.
  if (!b || b->mode() != GraphBuilder::Mode::kGraph || b->nested()) return Operation();
  const std::vector<int32_t>& effects = b->side_effects();
  std::vector<int32_t> updates(effects.begin() + static_cast<std::ptrdiff_t>(first_effect), effects.end());
  return Operation(b->graph_ptr(), b->group(updates, "train", loc));
}

int64_t Optimizer::iterations() const {
  const Tensor& t = impl_->step_.state()->value;
  return t.defined() ? static_cast<int64_t>(t.item<double>()) : 0;
}
std::vector<Variable> Optimizer::variables() const { return impl_->order_; }
Variable Optimizer::slot(const Variable& var, const std::string& slot) const {
  auto it = impl_->slots_.find(std::make_pair(var.id(), slot));
  return it == impl_->slots_.end() ? Variable() : it->second;
}
Variable Optimizer::iterations_variable() const { return impl_->step_; }

std::vector<Optimizer::SlotVariable> Optimizer::slot_variables() const {
  std::vector<SlotVariable> out;
  for (size_t i = 0; i < impl_->order_.size(); ++i)
    out.push_back({impl_->order_keys_[i].first, impl_->order_keys_[i].second, impl_->order_[i]});
  return out;
}

void Optimizer::restore_slot(const Variable& var, const std::string& slot, const Tensor& value) {
  if (!var.defined()) throw InvalidArgument("[optimizer] restore_slot of an undefined variable");
  if (value.dtype() != var.dtype() || value.shape() != var.shape())
    throw InvalidArgument("[optimizer] slot '" + slot + "' of '" + var.name() + "' must be " +
                          std::string(dtype_name(var.dtype())) + " " + var.shape().to_string() + ", got " +
                          std::string(dtype_name(value.dtype())) + " " + value.shape().to_string());
  auto key = std::make_pair(var.id(), slot);
  if (auto it = impl_->slots_.find(key); it != impl_->slots_.end()) return it->second.restore(value);
  impl_->pending_[key] = {var, value};
}

double Optimizer::learning_rate() const { return impl_->lr_; }
void Optimizer::set_learning_rate(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw InvalidArgument("[optimizer] learning rate must be a finite non-negative number, got " + std::to_string(lr));
  impl_->lr_ = lr;
  impl_->lr_var_.assign(constant(lr));
}

SGD::SGD(double learning_rate, double momentum, bool nesterov)
    : Optimizer(std::make_shared<SgdImpl>(learning_rate, momentum, nesterov)) {}

Adam::Adam(double learning_rate, double beta1, double beta2, double epsilon)
    : Optimizer(std::make_shared<AdamImpl>(learning_rate, beta1, beta2, epsilon)) {}

}  // namespace weft::optim
