// Definitions of the activation ops: Relu, Sigmoid, Tanh (elementwise) and Softmax, LogSoftmax
// (attr "axis", along which the values are normalised).
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_softmax(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  normalize_axis(ctx, ctx.attrs().get_or<int64_t>("axis", -1), ctx.input_shape(0).rank());
  infer_same_as_input(ctx);
}

// An exp per element dominates; the default cost (one flop per element) would make these look as
// cheap as an add to placement.
Cost exp_cost(const InferContext& ctx) {
  const int64_t n = ctx.output(0).shape.num_elements();
  const double e = n > 0 ? static_cast<double>(n) : 0;
  return {20 * e, 2 * e * dtype_size(ctx.output(0).dtype)};
}

// Softmax reads its input twice (max, then exp-and-sum) and writes twice (exp, then scale).
Cost softmax_cost(const InferContext& ctx) {
  const int64_t n = ctx.output(0).shape.num_elements();
  const double e = n > 0 ? static_cast<double>(n) : 0;
  return {24 * e, 4 * e * dtype_size(ctx.output(0).dtype)};
}

}  // namespace

namespace {
// ReluGrad(dy, x) = dy where x > 0, else 0: relu's backward pass in one loop instead of a
// comparison, a zeros tensor and a select. x may be relu's input or its output (both are positive
// at the same places); relu's gradient passes the output (api/ops/nn.cpp).
void infer_relu_grad(InferContext& ctx) {
  check_same_dtype(ctx, 0, 2);
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  if (ctx.input_shape(0) != ctx.input_shape(1))
    ctx.fail("gradient shape " + ctx.input_shape(0).to_string() + " differs from input shape " +
             ctx.input_shape(1).to_string());
  infer_same_as_input(ctx);
}
}  // namespace

void register_nn_defs() {
  op_registry().add({.name = "ReluGrad", .display = "relu_grad", .min_inputs = 2, .max_inputs = 2,
                     .infer = infer_relu_grad, .flags = kElementwise});
  op_registry().add({.name = "Relu", .display = "relu", .min_inputs = 1, .max_inputs = 1, .infer = infer_unary_numeric,
                     .flags = kElementwise});
  op_registry().add({.name = "Sigmoid", .display = "sigmoid", .min_inputs = 1, .max_inputs = 1,
                     .infer = infer_unary_float, .cost = exp_cost, .flags = kElementwise});
  op_registry().add({.name = "Tanh", .display = "tanh", .min_inputs = 1, .max_inputs = 1,
                     .infer = infer_unary_float, .cost = exp_cost, .flags = kElementwise});
  op_registry().add({.name = "Softmax", .display = "softmax", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"axis", AttrType::Int, false}}, .infer = infer_softmax, .cost = softmax_cost});
  op_registry().add({.name = "LogSoftmax", .display = "log_softmax", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"axis", AttrType::Int, false}}, .infer = infer_softmax, .cost = softmax_cost});
}

}  // namespace weft::defs
