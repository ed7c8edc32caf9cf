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
//
// To clip (or read) the true gradients before the update, as PyTorch's scaler.unscale_(opt),
// clip_grad_norm_, scaler.step(opt), or Keras's get_unscaled_gradients: unscale them, change
// them, and apply them with apply_unscaled_gradients, which does not divide again.
//
//     auto grads = opt.unscale_gradients(tape.gradient(opt.scale_loss(loss), vars), vars);
//     auto [clipped, norm] = clip_by_global_norm(grads, 1.0);   // the true gradients' norm
//     opt.apply_unscaled_gradients(clipped, vars);
//
// apply_unscaled_gradients makes the same check, on the gradients it is given, and the same step
// or skip. A non-finite gradient stays non-finite through clip_by_global_norm (an inf or NaN norm
// makes every clipped gradient NaN), so the step is still skipped and the scale halved; a
// change that can make an inf finite (clip_by_value) would hide it from the check.
// Under DataParallel, unscale_gradients all-reduces the gradients (once) and unscales the sums:
// whatever comes after it (clipping) sees the global gradient, identical on every replica, as
// with PyTorch's DistributedDataParallel, and apply_unscaled_gradients applies them without
// reducing again (it raises FailedPrecondition when unscale_gradients was not called earlier in
// the same DataParallel step, whose gradients would then never be all-reduced).
#pragma once

#include <cstddef>
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

  // Gradients of a scaled loss divided by the current scale, for a step that changes them (clips
  // them) before apply_unscaled_gradients; undefined ones stay undefined. Reads the scale only:
  // nothing is updated, and the result is the same as apply_gradients would apply. Under
  // DataParallel the gradients are all-reduced first (grads[i] belongs to vars[i], as for
  // apply_gradients), so the result is the global gradient on every replica.
  std::vector<Tensor> unscale_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                        const std::source_location& loc = std::source_location::current());
  // Gradients already unscaled (by unscale_gradients, then clipped or otherwise changed): applied
  // by the inner optimizer when every one is finite, else the step skipped, with the scale's
  // growth or halving exactly as apply_gradients; they are not divided again. Under DataParallel
  // they are not all-reduced again either: FailedPrecondition unless unscale_gradients was called
  // earlier in the same step's trace. Inside a GraphScope the result is the train op.
  Operation apply_unscaled_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
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
  // The DataParallel trace whose gradients unscale_gradients all-reduced last (checked, then
  // cleared, by apply_unscaled_gradients); only compared, never dereferenced.
  const void* reduced_in_ = nullptr;

  std::vector<Tensor> divide_by_scale(const std::vector<Tensor>& grads, const std::source_location& loc) const;
  // The finiteness check, then the inner optimizer's step or the skip; with no replica context.
  Operation step_or_skip(const std::vector<Tensor>& unscaled, const std::vector<Variable>& vars,
                         size_t first_effect, const std::source_location& loc);
};

}  // namespace weft::optim
