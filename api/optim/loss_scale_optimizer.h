// Dynamic loss scaling for float16 training (Keras's LossScaleOptimizer; PyTorch's GradScaler):
// float16's smallest normal number is 6e-5, below which small gradients flush to zero, so the
// loss is multiplied by a large scale before differentiating, and the gradients divided by it
// before the update.
//
//   nn::set_dtype_policy("mixed_float16");
//   optim::LossScaleOptimizer opt(optim::AdamW(1e-3, 0.1));
//   auto step = function([&](Tensor x, Tensor y) {
//     GradientTape tape;
//     Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
//     auto vars = model.trainable_variables();
//     opt.apply_gradients(tape.gradient(opt.scale_loss(loss), vars), vars);
//     return loss;
//   });
//   Checkpoint ckpt({{"model", model}, {"optimizer", opt.inner()}, {"loss_scale", opt.loss_scale_variable()}});
//
// apply_gradients divides the gradients by the scale and checks them with one reduction (their
// global norm): when every one is finite the inner optimizer takes its step, and after
// `dynamic_growth_steps` such steps in a row the scale doubles; when any is inf or NaN (the
// scale was too large) the step is skipped (variables, slots and the step count unchanged) and
// the scale halves, to no less than 1. Eagerly, traced (a cond in the step's graph), in a TF1
// Graph run by a Session, and under DataParallel, where the gradients are all-reduced first so
// that every replica decides alike.
#pragma once

#include <cstdint>
#include <vector>

#include "api/optim/optimizers.h"

namespace weft::optim {

class LossScaleOptimizer {
 public:
  // InvalidArgument for a scale that is not a finite number >= 1 or a growth interval < 1.
  explicit LossScaleOptimizer(Optimizer inner, double initial_scale = 32768.0, int64_t dynamic_growth_steps = 2000);

  // loss times the current scale (in loss's dtype).
  Tensor scale_loss(const Tensor& loss, const std::source_location& loc = std::source_location::current()) const;
  // Gradients of a scaled loss: unscaled, then applied by the inner optimizer or skipped. Inside
  // a GraphScope (TF1 style) the result is the train op, run as a Session target, as
  // Optimizer::apply_gradients's; otherwise an undefined Operation.
  Operation apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                       const std::source_location& loc = std::source_location::current());

  double loss_scale() const;
  Variable loss_scale_variable() const { return scale_; }  // float32 scalar, for checkpoints
  Variable good_steps_variable() const { return good_steps_; }
  Optimizer& inner() { return inner_; }
  int64_t iterations() const { return inner_.iterations(); }

 private:
  Optimizer inner_;
  int64_t growth_steps_;
  Variable scale_, good_steps_;
};

}  // namespace weft::optim
