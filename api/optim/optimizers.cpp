#include "api/optim/optimizers.h"

#include <cmath>
#include <optional>

#include "api/devices.h"
#include "api/dispatch.h"
#include "api/distribute/replica_context.h"
#include "api/graph_builder.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/optim/train_op.h"

namespace weft::optim {

// The step count and the learning rate live in variables too: a traced training step reads them
// at run time (an attribute would freeze the values seen while tracing), and eager and traced
// steps can be mixed freely. A schedule needs no rate variable: the traced step computes the rate
// from the step count.
class OptimizerImpl {
 public:
  explicit OptimizerImpl(const LearningRate& lr) : lr_(lr.value()), schedule_(lr.schedule()) {
    step_ = Variable(constant(0.0), "iterations", /*trainable=*/false);
    if (schedule_) return;
    if (!(lr_ >= 0) || !std::isfinite(lr_))
      throw InvalidArgument("[optimizer] learning rate must be a finite non-negative number, got " + std::to_string(lr_));
    lr_var_ = Variable(constant(lr_), "learning_rate", /*trainable=*/false);
  }
  virtual ~OptimizerImpl() = default;

  // One step of apply_gradients, as the updates see it.
  struct Step {
    // Eager: the step count after this step (1 for the first) and the step's learning rate.
    int64_t number = 0;
    double rate = 0;
    // Traced: the same two as float64 scalars of the graph; undefined eagerly.
    Tensor count;
    Tensor traced_rate;
    bool traced() const { return count.defined(); }
  };

  // Called once per apply_gradients before the updates: what every variable's update shares.
  virtual void begin_step(const Step&, const SourceLocation&) {}
  // After the updates: drop what begin_step kept (a traced step's tensors hold its graph).
  virtual void end_step() {}
  virtual void update(Variable& var, const Tensor& grad, const Step& step, const SourceLocation& loc) = 0;
  // The slots update() makes for every variable.
  virtual std::vector<std::string> slot_names() const = 0;

  // Step n (counting from 0: the count before it) runs at schedule(n), as Keras reads a schedule
  // at `iterations` before incrementing it.
  double rate_at(int64_t number) const { return schedule_ ? (*schedule_)(number - 1) : lr_; }
  Tensor traced_rate_at(const Tensor& count, const SourceLocation& loc) {
    return schedule_ ? (*schedule_)(sub(count, 1.0, loc), loc) : lr_var_.value(loc);
  }

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
  std::shared_ptr<const LearningRateSchedule> schedule_;  // null: the rate is lr_
  bool stepped_ = false;  // apply_gradients has run (or been traced) at least once
  Variable step_;    // float64 scalar
  Variable lr_var_;  // float64 scalar; undefined with a schedule
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
  SgdImpl(const LearningRate& lr, double momentum, bool nesterov)
      : OptimizerImpl(lr), momentum_(momentum), nesterov_(nesterov) {
    if (!(momentum >= 0 && momentum <= 1))
      throw InvalidArgument("[SGD] momentum must be in [0, 1], got " + std::to_string(momentum));
  }
  void update(Variable& var, const Tensor& grad, const Step& step, const SourceLocation& loc) override {
    if (momentum_ == 0) {
      static const OpDef& op = op_def("ApplyGradientDescent");
      std::vector<Tensor> ins{var.value_for_update(loc), grad};
      if (step.traced()) ins.push_back(step.traced_rate);
      dispatch(op, ins, step.traced() ? Attrs{} : Attrs{{"lr", step.rate}}, loc);
    } else {
      static const OpDef& op = op_def("ApplyMomentum");
      Variable& acc = slot_for(var, "momentum", loc);
      std::vector<Tensor> ins{var.value_for_update(loc), acc.value_for_update(loc), grad};
      Attrs attrs{{"momentum", momentum_}, {"nesterov", nesterov_}};
      if (step.traced()) ins.push_back(step.traced_rate);
      else attrs.set("lr", step.rate);
      dispatch(op, ins, attrs, loc);
    }
  }
  std::vector<std::string> slot_names() const override {
    return momentum_ == 0 ? std::vector<std::string>{} : std::vector<std::string>{"momentum"};
  }
  double momentum_;
  bool nesterov_;
};

// Adam, and AdamW when weight_decay is set: one fused update per variable (ApplyAdam, or
// ApplyAdamW for a variable that decays).
class AdamImpl final : public OptimizerImpl {
 public:
  AdamImpl(const char* name, const LearningRate& lr, double b1, double b2, double eps, double weight_decay)
      : OptimizerImpl(lr), name_(name), b1_(b1), b2_(b2), eps_(eps), weight_decay_(weight_decay) {
    if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
      throw InvalidArgument("[" + name_ + "] beta1 and beta2 must be in [0, 1), got " + std::to_string(b1) + " and " +
                            std::to_string(b2));
    if (!(eps > 0)) throw InvalidArgument("[" + name_ + "] epsilon must be positive, got " + std::to_string(eps));
    if (!(weight_decay >= 0) || !std::isfinite(weight_decay))
      throw InvalidArgument("[" + name_ + "] weight_decay must be a finite number >= 0, got " +
                            std::to_string(weight_decay));
  }

  void begin_step(const Step& step, const SourceLocation& loc) override {
    // Keras folds the bias corrections into the rate: lr * sqrt(1 - b2^t) / (1 - b1^t). The traced
    // expression is the eager one, in the same order, so traced steps match eager ones bit for bit.
    if (step.traced()) {
      const Tensor& t = step.count;
      Tensor bias2 = sub(1.0, pow(constant(b2_), t, loc), loc);
      Tensor bias1 = sub(1.0, pow(constant(b1_), t, loc), loc);
      traced_corrected_ = div(mul(step.traced_rate, sqrt(bias2, loc), loc), bias1, loc);
      // The decay follows the rate, not its bias correction (Keras, PyTorch).
      if (weight_decay_ > 0) traced_decay_ = mul(step.traced_rate, weight_decay_, loc);
    } else {
      const double t = static_cast<double>(step.number);
      corrected_ = step.rate * std::sqrt(1 - std::pow(b2_, t)) / (1 - std::pow(b1_, t));
      decay_ = step.rate * weight_decay_;
    }
  }

  void update(Variable& var, const Tensor& grad, const Step& step, const SourceLocation& loc) override {
    static const OpDef& adam = op_def("ApplyAdam");
    static const OpDef& adamw = op_def("ApplyAdamW");
    Variable& m = slot_for(var, "m", loc);
    Variable& v = slot_for(var, "v", loc);
    std::vector<Tensor> ins{var.value_for_update(loc), m.value_for_update(loc), v.value_for_update(loc), grad};
    Attrs attrs{{"beta1", b1_}, {"beta2", b2_}, {"epsilon", eps_}};
    const bool decays = weight_decay_ > 0 && !excluded(var);
    if (step.traced()) {
      ins.push_back(traced_corrected_);
      if (decays) ins.push_back(traced_decay_);
    } else {
      attrs.set("lr", corrected_);
      if (decays) attrs.set("decay", decay_);
    }
    dispatch(decays ? adamw : adam, ins, attrs, loc);
  }

  std::vector<std::string> slot_names() const override { return {"m", "v"}; }

  void end_step() override {
    traced_corrected_ = Tensor();
    traced_decay_ = Tensor();
  }

  bool excluded(const Variable& var) const {
    const std::string& name = var.name();
    for (const std::string& part : excluded_)
      if (name.find(part) != std::string::npos) return true;
    return false;
  }

  std::string name_;
  double b1_, b2_, eps_, weight_decay_;
  std::vector<std::string> excluded_;
  // This step's bias-corrected rate and decay factor (lr * weight_decay): doubles eagerly, graph
  // scalars when traced.
  double corrected_ = 0, decay_ = 0;
  Tensor traced_corrected_, traced_decay_;
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
  OptimizerImpl::Step step;
  if (b) {
    step.count = impl_->step_.assign_add(constant(1.0), loc);
    step.traced_rate = impl_->traced_rate_at(step.count, loc);
  } else {
    step.number = iterations() + 1;
    step.rate = impl_->rate_at(step.number);
    impl_->step_.assign(constant(static_cast<double>(step.number)), loc);
  }
  impl_->stepped_ = true;
  impl_->begin_step(step, loc);
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!applied[i].defined()) continue;
    Variable v = vars[i];
    impl_->update(v, applied[i], step, loc);
  }
  impl_->end_step();
  return detail::train_op(b, first_effect, loc);
}

Operation detail::train_op(GraphBuilder* b, size_t first_effect, const SourceLocation& loc) {
  if (!b || b->mode() != GraphBuilder::Mode::kGraph || b->nested()) return Operation();
  const std::vector<int32_t>& effects = b->side_effects();
  std::vector<int32_t> updates(effects.begin() + static_cast<std::ptrdiff_t>(first_effect), effects.end());
  return Operation(b->graph_ptr(), b->group(updates, "train", loc));
}

void Optimizer::build(const std::vector<Variable>& vars, const SourceLocation& loc) {
  for (const Variable& var : vars) {
    if (!var.defined()) throw InvalidArgument("[Optimizer::build] an undefined variable");
    for (const std::string& slot : impl_->slot_names()) impl_->slot_for(var, slot, loc);
  }
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

double Optimizer::learning_rate() const {
  return impl_->schedule_ ? (*impl_->schedule_)(iterations()) : impl_->lr_;
}
std::shared_ptr<const LearningRateSchedule> Optimizer::learning_rate_schedule() const { return impl_->schedule_; }
void Optimizer::set_learning_rate(double lr) {
  if (impl_->schedule_)
    throw FailedPrecondition("[optimizer] set_learning_rate: this optimizer was made with a learning-rate schedule, "
                             "which its steps follow; make a new optimizer to change it");
  if (!(lr >= 0) || !std::isfinite(lr))
    throw InvalidArgument("[optimizer] learning rate must be a finite non-negative number, got " + std::to_string(lr));
  impl_->lr_ = lr;
  impl_->lr_var_.assign(constant(lr));
}

SGD::SGD(LearningRate learning_rate, double momentum, bool nesterov)
    : Optimizer(std::make_shared<SgdImpl>(learning_rate, momentum, nesterov)) {}

Adam::Adam(LearningRate learning_rate, double beta1, double beta2, double epsilon)
    : Optimizer(std::make_shared<AdamImpl>("Adam", learning_rate, beta1, beta2, epsilon, 0.0)) {}

AdamW::AdamW(LearningRate learning_rate, double weight_decay, double beta1, double beta2, double epsilon)
    : Optimizer(std::make_shared<AdamImpl>("AdamW", learning_rate, beta1, beta2, epsilon, weight_decay)) {}

void AdamW::exclude_from_weight_decay(const std::vector<std::string>& substrings) {
  auto& impl = static_cast<AdamImpl&>(*impl_);
  if (impl.stepped_)
    throw FailedPrecondition("[AdamW] exclude_from_weight_decay must be called before the first apply_gradients");
  for (const std::string& s : substrings) {
    if (s.empty()) throw InvalidArgument("[AdamW] exclude_from_weight_decay: an empty string would exclude every variable");
    impl.excluded_.push_back(s);
  }
}

double AdamW::weight_decay() const { return static_cast<const AdamImpl&>(*impl_).weight_decay_; }

}  // namespace weft::optim
