// Fused optimizer updates. They write the variable (and slot) buffers in place: one pass over
// memory per variable instead of the 5-10 temporaries the same update costs as separate ops.
// Inputs: var, [slots...], grad; no outputs; stateful so they always run and are never merged.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_apply(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloating);
  // An optional last input carries the learning rate as a float64 scalar: traced optimizers
  // compute it in the graph (from the step count), where an attribute would freeze it.
  int tensors = ctx.op().min_inputs;
  if (ctx.num_inputs() > tensors) {
    if (ctx.input_dtype(tensors) != DType::Float64 || ctx.input_shape(tensors).rank() != 0)
      ctx.fail("the learning-rate input must be a float64 scalar, got " +
               std::string(dtype_name(ctx.input_dtype(tensors))) + ctx.input_shape(tensors).to_string());
  } else if (!ctx.attrs().find("lr")) {
    ctx.fail("needs a learning rate: the 'lr' attribute or a last float64 input");
  }
  check_same_dtype(ctx, 0, tensors);
  for (int i = 1; i < tensors; ++i)
    if (ctx.input_shape(i) != ctx.input_shape(0))
      ctx.fail("input " + std::to_string(i) + " has shape " + ctx.input_shape(i).to_string() +
               " but the variable has shape " + ctx.input_shape(0).to_string());
  ctx.set_num_outputs(0);
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
}

}  // namespace weft::defs
