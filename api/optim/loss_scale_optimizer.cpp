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

Operation LossScaleOptimizer::apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                         const std::source_location& loc) {
  if (grads.size() != vars.size())
    throw InvalidArgument("[LossScaleOptimizer] " + std::to_string(grads.size()) + " gradients for " +
                          std::to_string(vars.size()) + " variables");
  // Under DataParallel the gradients are all-reduced here, before the check, so every replica
  // sees the same sums and takes (or skips) the same step; the inner optimizer then applies them
  // without reducing again.
  GraphBuilder* b = current_builder();
  distribute::ReplicaContext* replicas = b ? distribute::current_replica_context() : nullptr;
  const std::vector<Tensor> reduced = replicas ? replicas->all_reduce_gradients(grads, vars, loc) : grads;
  const distribute::ReplicaContextScope reduced_already(nullptr);
  const size_t first_effect = b ? b->side_effects().size() : 0;

  const Tensor scale = scale_.value(loc);
  std::vector<Tensor> unscaled(reduced.size());
  for (size_t i = 0; i < reduced.size(); ++i)
    if (reduced[i].defined()) unscaled[i] = div(reduced[i], cast(scale, reduced[i].dtype(), loc), loc);
  // The norm is inf or NaN exactly when some element is (or the sum of squares overflows, which
  // only gradients near float's limit do: such a step is skipped as well).
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
