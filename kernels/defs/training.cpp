// Fused optimizer updates. They write the variable (and slot) buffers in place: one pass over
// memory per variable instead of the 5-10 temporaries the same update costs as separate ops.
// Inputs: var, [slots...], grad; no outputs; stateful so they always run and are never merged.
//
// And GlobalSquaredNorm, the reduction of gradient clipping by the global norm: the sum of the
// squares of every element of all its inputs, one op over all the gradients rather than a square,
// a sum and an add per gradient.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// The rates (`names`, each a float64 scalar) come either all as attributes or all as the inputs
// after the first `tensors`: traced optimizers compute them in the graph (from the step count and
// a schedule), where an attribute would freeze them.
void check_rates(InferContext& ctx, int tensors, std::initializer_list<std::pair<const char*, const char*>> names) {
  const int rates = static_cast<int>(names.size());
  if (ctx.num_inputs() == tensors) {
    for (const auto& [attr, what] : names)
      if (!ctx.attrs().find(attr))
        ctx.fail(std::string("needs a ") + what + ": the '" + attr + "' attribute or a float64 input");
    return;
  }
  if (ctx.num_inputs() != tensors + rates)
    ctx.fail("takes " + std::to_string(tensors) + " tensors and then either no rate inputs or " + std::to_string(rates) +
             ", got " + std::to_string(ctx.num_inputs()) + " inputs");
  int i = tensors;
  for (const auto& [attr, what] : names) {
    if (ctx.input_dtype(i) != DType::Float64 || ctx.input_shape(i).rank() != 0)
      ctx.fail(std::string("the ") + what + " input must be a float64 scalar, got " +
               std::string(dtype_name(ctx.input_dtype(i))) + ctx.input_shape(i).to_string());
    ++i;
  }
}

// Inputs [0, tensors): the variable, its slots and the gradient, of one dtype and shape.
void check_tensors(InferContext& ctx, int tensors) {
  check_dtype_in(ctx, 0, kFloating);
  check_same_dtype(ctx, 0, tensors);
  for (int i = 1; i < tensors; ++i)
    if (ctx.input_shape(i) != ctx.input_shape(0))
      ctx.fail("input " + std::to_string(i) + " has shape " + ctx.input_shape(i).to_string() +
               " but the variable has shape " + ctx.input_shape(0).to_string());
  ctx.set_num_outputs(0);
}

void infer_apply(InferContext& ctx) {
  check_tensors(ctx, ctx.op().min_inputs);
  check_rates(ctx, ctx.op().min_inputs, {{"lr", "learning rate"}});
}

// ApplyAdamW's rates: Adam's bias-corrected rate, and the decay factor lr * weight_decay.
void infer_apply_adamw(InferContext& ctx) {
  check_tensors(ctx, 4);
  check_rates(ctx, 4, {{"lr", "learning rate"}, {"decay", "decay factor"}});
}

// Any number (>= 1) of tensors of one floating dtype; a scalar of that dtype.
void infer_global_squared_norm(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_same_dtype(ctx, 0, ctx.num_inputs());
  ctx.set_output(0, ctx.input_dtype(0), Shape{});
}

Cost global_squared_norm_cost(const InferContext& ctx) {
  double elements = 0, bytes = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t n = ctx.input_shape(i).num_elements();
    if (n > 0) elements += static_cast<double>(n);
  }
  bytes = elements * static_cast<double>(dtype_size(ctx.input_dtype(0)));
  return {2 * elements, bytes};
}

}  // namespace

void register_training_defs() {
  op_registry().add({.name = "ApplyGradientDescent", .display = "apply_gradient_descent", .min_inputs = 2,
                     .max_inputs = 3, .num_outputs = 0, .attrs = {{"lr", AttrType::Float, false}}, .infer = infer_apply,
                     .flags = kStateful | kSideEffect | kNotDifferentiable});
  op_registry().add({.name = "ApplyMomentum", .display = "apply_momentum", .min_inputs = 3, .max_inputs = 4,
                     .num_outputs = 0,
                     .attrs = {{"lr", AttrType::Float, false}, {"momentum", AttrType::Float}, {"nesterov", AttrType::Bool}},
                     .infer = infer_apply, .flags = kStateful | kSideEffect | kNotDifferentiable});
  op_registry().add({.name = "ApplyAdam", .display = "apply_adam", .min_inputs = 4, .max_inputs = 5, .num_outputs = 0,
                     .attrs = {{"lr", AttrType::Float, false}, {"beta1", AttrType::Float}, {"beta2", AttrType::Float},
                               {"epsilon", AttrType::Float}},
                     .infer = infer_apply, .flags = kStateful | kSideEffect | kNotDifferentiable});
  // Adam with decoupled weight decay (api/optim/optimizers.h): var -= decay * var first, then
  // Adam's step, in the same pass.
  op_registry().add({.name = "ApplyAdamW", .display = "apply_adamw", .min_inputs = 4, .max_inputs = 6,
                     .num_outputs = 0,
                     .attrs = {{"lr", AttrType::Float, false}, {"decay", AttrType::Float, false},
                               {"beta1", AttrType::Float}, {"beta2", AttrType::Float}, {"epsilon", AttrType::Float}},
                     .infer = infer_apply_adamw, .flags = kStateful | kSideEffect | kNotDifferentiable});
  // Accumulates in float64 whatever the dtype; 16-bit inputs are summed through float32 (their
  // squares exactly) and the result rounded once.
  op_registry().add({.name = "GlobalSquaredNorm", .display = "global_squared_norm", .min_inputs = 1,
                     .max_inputs = -1, .infer = infer_global_squared_norm, .cost = global_squared_norm_cost});
}

}  // namespace weft::defs
