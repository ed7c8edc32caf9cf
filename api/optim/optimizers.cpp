#include "api/optim/optimizers.h"

#include <cmath>

#include "api/dispatch.h"
#include "api/ops/creation.h"

namespace weft::optim {

class OptimizerImpl {
 public:
  explicit OptimizerImpl(double lr) : lr_(lr) {
    if (!(lr >= 0) || !std::isfinite(lr))
      throw InvalidArgument("[optimizer] learning rate must be a finite non-negative number, got " + std::to_string(lr));
  }
  virtual ~OptimizerImpl() = default;
  virtual void update(Variable& var, const Tensor& grad, int64_t step) = 0;

  Variable& slot_for(const Variable& var, const std::string& slot) {
    auto key = std::make_pair(var.id(), slot);
    auto it = slots_.find(key);
    if (it != slots_.end()) return it->second;
    Variable s(zeros(var.shape(), var.dtype()), var.name() + "/" + slot, /*trainable=*/false);
    order_.push_back(s);
    return slots_.emplace(key, s).first->second;
  }

  double lr_;
  int64_t iterations_ = 0;
  std::map<std::pair<const VariableState*, std::string>, Variable> slots_;
  std::vector<Variable> order_;
};

namespace {

class SgdImpl final : public OptimizerImpl {
 public:
  SgdImpl(double lr, double momentum, bool nesterov) : OptimizerImpl(lr), momentum_(momentum), nesterov_(nesterov) {
    if (!(momentum >= 0 && momentum <= 1))
      throw InvalidArgument("[SGD] momentum must be in [0, 1], got " + std::to_string(momentum));
  }
  void update(Variable& var, const Tensor& grad, int64_t) override {
    if (momentum_ == 0) {
      static const OpDef& op = op_def("ApplyGradientDescent");
      dispatch(op, std::vector<Tensor>{var.value_for_update(), grad}, {{"lr", lr_}});
    } else {
      static const OpDef& op = op_def("ApplyMomentum");
      Variable& acc = slot_for(var, "momentum");
      dispatch(op, std::vector<Tensor>{var.value_for_update(), acc.value_for_update(), grad},
               {{"lr", lr_}, {"momentum", momentum_}, {"nesterov", nesterov_}});
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
  void update(Variable& var, const Tensor& grad, int64_t step) override {
    static const OpDef& op = op_def("ApplyAdam");
    Variable& m = slot_for(var, "m");
    Variable& v = slot_for(var, "v");
    const double t = static_cast<double>(step);
    const double lr_t = lr_ * std::sqrt(1 - std::pow(b2_, t)) / (1 - std::pow(b1_, t));
    dispatch(op, std::vector<Tensor>{var.value_for_update(), m.value_for_update(), v.value_for_update(), grad},
             {{"lr", lr_t}, {"beta1", b1_}, {"beta2", b2_}, {"epsilon", eps_}});
  }
  double b1_, b2_, eps_;
};

}  // namespace

void Optimizer::apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
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
  int64_t step = ++impl_->iterations_;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!grads[i].defined()) continue;
    Variable v = vars[i];
    impl_->update(v, grads[i], step);
  }
}

int64_t Optimizer::iterations() const { return impl_->iterations_; }
std::vector<Variable> Optimizer::variables() const { return impl_->order_; }
Variable Optimizer::slot(const Variable& var, const std::string& slot) const {
  auto it = impl_->slots_.find(std::make_pair(var.id(), slot));
  return it == impl_->slots_.end() ? Variable() : it->second;
}
double Optimizer::learning_rate() const { return impl_->lr_; }
void Optimizer::set_learning_rate(double lr) { impl_->lr_ = lr; }

SGD::SGD(double learning_rate, double momentum, bool nesterov)
    : Optimizer(std::make_shared<SgdImpl>(learning_rate, momentum, nesterov)) {}

Adam::Adam(double learning_rate, double beta1, double beta2, double epsilon)
    : Optimizer(std::make_shared<AdamImpl>(learning_rate, beta1, beta2, epsilon)) {}

}  // namespace weft::optim
