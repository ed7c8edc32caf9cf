// Definitions of batch normalisation as one op and its gradient (TensorFlow's FusedBatchNormV3
// and FusedBatchNormGradV3, NHWC only):
//   FusedBatchNorm(x, scale, offset, mean, variance), attrs "epsilon", "is_training"
//     -> y, batch_mean, batch_variance, saved_inv_std
//   FusedBatchNormGrad(dy, x, scale, saved_mean, saved_inv_std), attrs "is_training",
//     "epsilon" (optional; only the gradient's own gradient reads it) -> dx, dscale, doffset
// x is [N, C] or NHWC, normalised per channel (the last axis) over every other axis. The [C]
// vectors (scale, offset, the statistics) are float32, or float64 for float64 x: a float16 or
// bfloat16 x keeps its statistics in float32, where its sums of squares neither overflow nor lose
// the small variances. batch_variance is the biased (population) variance, the one that
// normalises; saved_inv_std = 1 / sqrt(variance + epsilon) spares the gradient the recomputation.
//
// In training the mean and variance inputs are not read: they may be the moving statistics or
// empty [0] vectors (fused_batch_norm passes empty ones when given none). In inference they are
// required, [C], and batch_mean / batch_variance are them, passed through.
#include <string>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

DType param_dtype(DType x) { return x == DType::Float64 ? DType::Float64 : DType::Float32; }

// x's channel count (or, unknown there, the first [C] parameter's), after checking x's rank.
int64_t channels_of(const InferContext& ctx, int x, const char* what) {
  const Shape& s = ctx.input_shape(x);
  if (s.rank() != 2 && s.rank() != 4)
    ctx.fail("expects " + std::string(what) + " of rank 2 [N, C] or 4 (NHWC), got " +
             std::string(dtype_name(ctx.input_dtype(x))) + " " + s.to_string());
  return s[s.rank() - 1];
}

// Input i must be a [C] vector of the parameter dtype (or, where `may_be_empty`, [0]).
void check_param(const InferContext& ctx, int i, const char* name, DType want, int64_t* c, bool may_be_empty) {
  const Shape& s = ctx.input_shape(i);
  if (ctx.input_dtype(i) != want)
    ctx.fail(std::string(name) + " must be " + std::string(dtype_name(want)) + " for " +
             std::string(dtype_name(ctx.input_dtype(0))) + " x, got " + std::string(dtype_name(ctx.input_dtype(i))) +
             " " + s.to_string());
  const bool empty_ok = may_be_empty && s.rank() == 1 && s[0] == 0;
  if (s.rank() != 1 || (!empty_ok && s[0] >= 0 && *c >= 0 && s[0] != *c))
    ctx.fail(std::string(name) + " must be a vector of the " + (*c >= 0 ? std::to_string(*c) + " " : "") +
             "channels, got " + s.to_string() + " for x " + describe_inputs(ctx));
  if (*c < 0 && !empty_ok) *c = s[0];
}

double epsilon_of(const InferContext& ctx) {
  const double eps = ctx.attrs().get_or<double>("epsilon", 1e-3);
  if (!(eps >= 0)) ctx.fail("epsilon must be >= 0, got " + std::to_string(eps));
  return eps;
}

void infer_batch_norm(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  epsilon_of(ctx);
  const bool training = ctx.attrs().get<bool>("is_training");
  const DType p = param_dtype(ctx.input_dtype(0));
  int64_t c = channels_of(ctx, 0, "x");
  check_param(ctx, 1, "scale", p, &c, false);
  check_param(ctx, 2, "offset", p, &c, false);
  // Training ignores them: the moving statistics, empty vectors or anything [C]-shaped will do.
  check_param(ctx, 3, "mean", p, &c, training);
  check_param(ctx, 4, "variance", p, &c, training);
  ctx.set_num_outputs(4);
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  for (int i = 1; i < 4; ++i) ctx.set_output(i, p, Shape{c});
}

void infer_batch_norm_grad(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_same_dtype(ctx, 0, 2);
  epsilon_of(ctx);
  ctx.attrs().get<bool>("is_training");
  const DType p = param_dtype(ctx.input_dtype(0));
  int64_t c = channels_of(ctx, 1, "x");
  const Shape& dy = ctx.input_shape(0);
  const Shape& x = ctx.input_shape(1);
  bool same = dy.rank() == x.rank();
  for (int64_t i = 0; same && i < x.rank(); ++i) same = dy[i] < 0 || x[i] < 0 || dy[i] == x[i];
  if (!same) ctx.fail("the gradient dy " + dy.to_string() + " does not match x " + x.to_string());
  check_param(ctx, 2, "scale", p, &c, false);
  check_param(ctx, 3, "saved_mean", p, &c, false);
  check_param(ctx, 4, "saved_inv_std", p, &c, false);
  ctx.set_num_outputs(3);
  ctx.set_output(0, ctx.input_dtype(1), x);
  ctx.set_output(1, p, Shape{c});
  ctx.set_output(2, p, Shape{c});
}

// Training reads x three times (mean, variance, normalise) and writes y once.
Cost batch_norm_cost(const InferContext& ctx) {
  const int64_t n = ctx.input_shape(0).num_elements();
  const double e = n > 0 ? static_cast<double>(n) : 0;
  return {6 * e, 4 * e * dtype_size(ctx.input_dtype(0))};
}

}  // namespace

void register_normalization_defs() {
  op_registry().add({.name = "FusedBatchNorm", .display = "fused_batch_norm", .min_inputs = 5, .max_inputs = 5,
                     .num_outputs = 4,
                     .attrs = {{"epsilon", AttrType::Float, false}, {"is_training", AttrType::Bool}},
                     .infer = infer_batch_norm, .cost = batch_norm_cost});
  op_registry().add({.name = "FusedBatchNormGrad", .display = "fused_batch_norm_grad", .min_inputs = 5,
                     .max_inputs = 5, .num_outputs = 3,
                     .attrs = {{"epsilon", AttrType::Float, false}, {"is_training", AttrType::Bool}},
                     .infer = infer_batch_norm_grad, .cost = batch_norm_cost});
}

}  // namespace weft::defs
