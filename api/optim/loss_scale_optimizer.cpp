#include "api/optim/loss_scale_optimizer.h"

#include <cmath>
#include <limits>
#include <string>

#include "api/control_flow.h"
#include "api/distribute/replica_context.h"
#include "api/graph_builder.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/optim/clipping.h"
#include "api/optim/train_op.h"
#include "runtime/error.h"

namespace weft::optim {

LossScaleOptimizer::LossScaleOptimizer(Optimizer inner, double initial_scale, int64_t dynamic_growth_steps)
    : inner_(std::move(inner)), growth_steps_(dynamic_growth_steps) {
  if (!(initial_scale >= 1) || !std::isfinite(initial_scale) || initial_scale > std::numeric_limits<float>::max())
    throw InvalidArgument("[LossScaleOptimizer] the initial scale must be a finite number >= 1, got " +
                          std::to_string(initial_scale));
  if (dynamic_growth_steps < 1)
    throw InvalidArgument("[LossScaleOptimizer] dynamic_growth_steps must be >= 1, got " +
                          std::to_string(dynamic_growth_steps));
  scale_ = Variable(constant(static_cast<float>(initial_scale)), "loss_scale", /*trainable=*/false);
  good_steps_ = Variable(constant(0.0f), "loss_scale_good_steps", /*trainable=*/false);
}

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss, const std::source_location& loc) const {
  if (!loss.defined()) throw InvalidArgument("[LossScaleOptimizer] scale_loss got an undefined loss");
  return mul(loss, cast(scale_.value(loc), loss.dtype(), loc), loc);
}

double LossScaleOptimizer::loss_scale() const { return scale_.state()->value.item<float>(); }

namespace {

void check_sizes(const char* fn, const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
  if (grads.size() != vars.size())
    throw InvalidArgument(std::string("[LossScaleOptimizer::") + fn + "] " + std::to_string(grads.size()) +
                          " gradients for " + std::to_string(vars.size()) + " variables");
}

}  // namespace

std::vector<Tensor> LossScaleOptimizer::divide_by_scale(const std::vector<Tensor>& grads,
                                                        const std::source_location& loc) const {
  const Tensor scale = scale_.value(loc);
  std::vector<Tensor> unscaled(grads.size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined()) unscaled[i] = div(grads[i], cast(scale, grads[i].dtype(), loc), loc);
  return unscaled;
}

Operation LossScaleOptimizer::apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                         const std::source_location& loc) {
  check_sizes("apply_gradients", grads, vars);
  // Under DataParallel the gradients are all-reduced here, before the check, so every replica
  // sees the same sums and takes (or skips) the same step; the inner optimizer then applies them
  // without reducing again.
  GraphBuilder* b = current_builder();
  distribute::ReplicaContext* replicas = b ? distribute::current_replica_context() : nullptr;
  const std::vector<Tensor> reduced = replicas ? replicas->all_reduce_gradients(grads, vars, loc) : grads;
  const distribute::ReplicaContextScope reduced_already(nullptr);
  const size_t first_effect = b ? b->side_effects().size() : 0;
  return step_or_skip(divide_by_scale(reduced, loc), vars, first_effect, loc);
}

std::vector<Tensor> LossScaleOptimizer::unscale_gradients(const std::vector<Tensor>& grads,
                                                          const std::vector<Variable>& vars,
                                                          const std::source_location& loc) {
  check_sizes("unscale_gradients", grads, vars);
  // Under DataParallel: all-reduced once, here, so that clipping sees the global gradient and
  // apply_unscaled_gradients (which reduces nothing) applies the same update on every replica.
  GraphBuilder* b = current_builder();
  distribute::ReplicaContext* replicas = b ? distribute::current_replica_context() : nullptr;
  if (!replicas) return divide_by_scale(grads, loc);
  const std::vector<Tensor> reduced = replicas->all_reduce_gradients(grads, vars, loc);
  reduced_in_ = b;
  return divide_by_scale(reduced, loc);
}

Operation LossScaleOptimizer::apply_unscaled_gradients(const std::vector<Tensor>& grads,
                                                       const std::vector<Variable>& vars,
                                                       const std::source_location& loc) {
  check_sizes("apply_unscaled_gradients", grads, vars);
  GraphBuilder* b = current_builder();
  if (b && distribute::current_replica_context()) {
    const bool reduced = reduced_in_ == b;
    reduced_in_ = nullptr;
    if (!reduced)
      throw FailedPrecondition(
          "[LossScaleOptimizer::apply_unscaled_gradients] in a DataParallel step the gradients must come from "
          "unscale_gradients earlier in the same step, which all-reduces them over the replicas (this call "
          "does not); use apply_gradients for gradients of the scaled loss as they are");
  }
  const distribute::ReplicaContextScope reduced_already(nullptr);
  const size_t first_effect = b ? b->side_effects().size() : 0;
  return step_or_skip(grads, vars, first_effect, loc);
}

Operation LossScaleOptimizer::step_or_skip(const std::vector<Tensor>& unscaled, const std::vector<Variable>& vars,
                                          size_t first_effect, const std::source_location& loc) {
  GraphBuilder* b = current_builder();
  // The norm is inf or NaN exactly when some element is (or the sum of squares overflows, which
  // only gradients near float's limit do: such a step is skipped as well). Gradients clipped by
  // clip_by_global_norm after a non-finite norm are all NaN, so they are caught here too.
  const Tensor finite = less(global_norm(unscaled, loc), std::numeric_limits<double>::infinity(), loc);

  auto good_step = [&] {
    inner_.apply_gradients(unscaled, vars, loc);
    const Tensor good = add(good_steps_.value(loc), 1.0f, loc);
    const Tensor grow = greater_equal(good, static_cast<float>(growth_steps_), loc);
    scale_.assign(where(grow, mul(scale_.value(loc), 2.0f, loc), scale_.value(loc), loc), loc);
    good_steps_.assign(where(grow, zeros_like(good, loc), good, loc), loc);
    return scale_.value(loc);
  };
  auto skipped_step = [&] {
    scale_.assign(maximum(div(scale_.value(loc), 2.0f, loc), 1.0f, loc), loc);
    good_steps_.assign(constant(0.0f), loc);
    return scale_.value(loc);
  };
  if (!b) {
    if (finite.item<bool>()) good_step();
    else skipped_step();
    return Operation();
  }
  // No variable can be made inside a cond branch: the inner optimizer's slots are made first.
  std::vector<Variable> updated;
  for (size_t i = 0; i < vars.size(); ++i)
    if (unscaled[i].defined()) updated.push_back(vars[i]);
  inner_.build(updated, loc);
  cond(finite, good_step, skipped_step, loc);
  return detail::train_op(b, first_effect, loc);  // in a TF1 graph: the cond and the slots' initialisers
}

}  // namespace weft::optim
