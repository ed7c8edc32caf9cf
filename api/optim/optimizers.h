// Optimizers: apply gradients to variables, keeping their slot variables (momentum, Adam's m and
// v) named after the variable they serve ("dense/kernel/m").
//
//   optim::Adam opt(1e-3);
//   opt.apply_gradients(tape.gradient(loss, vars), vars);
//
//   optim::AdamW opt(optim::CosineDecay(1e-3, 5000, 0.1, 100), /*weight_decay=*/0.1);
//   opt.exclude_from_weight_decay({"bias", "layer_normalization"});
//   auto [clipped, norm] = clip_by_global_norm(tape.gradient(loss, vars), 1.0);
//   opt.apply_gradients(clipped, vars);
//
//   // TF1 style, inside a GraphScope: the result is the train op, run as a Session target.
//   Operation train = opt.apply_gradients(tape.gradient(loss, vars), vars);
//   sess.run({{x, xb}, {y, yb}}, {loss}, {train});
//
// Optimizers are handles: copies share state (slots, step count).
#pragma once

#include <map>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "api/graph.h"
#include "api/optim/schedules.h"
#include "api/variable.h"

namespace weft::optim {

class OptimizerImpl;

class Optimizer {
 public:
  // grads[i] updates vars[i]; InvalidArgument when the lists differ in length or a gradient's
  // shape or dtype does not match its variable. An undefined gradient leaves its variable alone.
  // Inside a GraphScope the updates (and the step count's) become nodes at the caller's line,
  // grouped under a NoOp named "train" (in the current NameScope), which is returned: they run
  // each time a Session runs it as a target, and never otherwise, as TensorFlow 1's minimize.
  // Slot variables made then are initialised by the Session's next run. Eagerly the updates run
  // now and the result is an undefined Operation; in a traced function they run with each call.
  Operation apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                            const std::source_location& loc = std::source_location::current());
  int64_t iterations() const;
  // Creates the slot variables of `vars` now, as the first update would (Keras's
  // optimizer.build): for steps that update inside a cond branch, where no variable can be made
  // (optim::LossScaleOptimizer calls it). Slots that exist are kept.
  void build(const std::vector<Variable>& vars, const std::source_location& loc = std::source_location::current());
  // Slot variables in creation order (for checkpoints).
  std::vector<Variable> variables() const;
  // The slot `slot` ("m", "v", "momentum") of `var`, undefined if not created yet.
  Variable slot(const Variable& var, const std::string& slot) const;
  // The rate of the next step: the number, or the schedule at iterations().
  double learning_rate() const;
  // FailedPrecondition for an optimizer made with a schedule (whose traced steps compute the rate
  // from the schedule): make a new optimizer instead, as Keras asks.
  void set_learning_rate(double lr);
  // The schedule the optimizer was made with; null for a number.
  std::shared_ptr<const LearningRateSchedule> learning_rate_schedule() const;

  // For checkpoints.
  // The step count (a float64 scalar): saved so that Adam's bias correction resumes where it was.
  Variable iterations_variable() const;
  struct SlotVariable {
    const VariableState* owner;  // the variable it serves (compare with Variable::id())
    std::string name;            // "m", "v", "momentum"
    Variable slot;
  };
  // Every slot, in creation order.
  std::vector<SlotVariable> slot_variables() const;
  // Gives `var`'s slot `slot` this value: now if the slot exists, else as soon as the first
  // update creates it (restoring before the first step, as Keras defers slot restores).
  // InvalidArgument if the value's dtype or shape is not the variable's.
  void restore_slot(const Variable& var, const std::string& slot, const Tensor& value);

 protected:
  explicit Optimizer(std::shared_ptr<OptimizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<OptimizerImpl> impl_;
};

// Each learning_rate is a number or a schedule (schedules.h).
class SGD : public Optimizer {
 public:
  explicit SGD(LearningRate learning_rate = 0.01, double momentum = 0.0, bool nesterov = false);
};

// Keras' Adam: epsilon is added to sqrt(v), and the bias corrections scale the rate.
class Adam : public Optimizer {
 public:
  explicit Adam(LearningRate learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-7);
};

// Adam with decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"),
// as Keras' AdamW computes it: each step first shrinks the variable by the step's learning rate
// times weight_decay, then takes Adam's step, in one fused update:
//
//   var <- var - lr * weight_decay * var - lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)
//
// lr is the step's rate (a schedule's value, not bias-corrected). PyTorch's AdamW multiplies by
// (1 - lr * weight_decay), the same decay, and adds eps to the bias-corrected sqrt(v) instead,
// which differs only while sqrt(v) is about as small as eps.
class AdamW : public Optimizer {
 public:
  // InvalidArgument for a weight_decay that is negative or not finite, or the betas and epsilon
  // Adam refuses.
  explicit AdamW(LearningRate learning_rate = 0.001, double weight_decay = 0.01, double beta1 = 0.9,
                 double beta2 = 0.999, double epsilon = 1e-7);
  // Variables whose name (their path: "dense/bias", "block/layer_normalization/gamma") contains
  // one of `substrings` get no weight decay; each call adds to the list. Before the first step
  // only (FailedPrecondition after: steps already traced keep the choice they were traced with).
  void exclude_from_weight_decay(const std::vector<std::string>& substrings);
  double weight_decay() const;
};

}  // namespace weft::optim
