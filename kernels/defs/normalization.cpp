// Definitions of the normalisation ops: batch normalisation and layer normalisation, each one op
// with its gradient as another.
//
// Batch normalisation (TensorFlow's FusedBatchNormV3 and FusedBatchNormGradV3, NHWC only):
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
// "activation" (optional, "" or "relu"; graph fusion sets it, never the front-end): FusedBatchNorm
// returns relu(y) as its y, and FusedBatchNormGrad takes a sixth input, that activated y, and
// reads its dy as ReluGrad(dy, y) -- the batch norm then relu of a ResNet block, and their
// gradients, without a pass of their own over the activations (kernels/activation_attr.h).
//
// In training the mean and variance inputs are not read: they may be the moving statistics or
// empty [0] vectors (fused_batch_norm passes empty ones when given none). In inference they are
// required, [C], and batch_mean / batch_variance are them, passed through.
//
// Layer normalisation (PyTorch's native_layer_norm), over the trailing axes from "axis":
//   LayerNorm(x, gamma, beta), attrs "axis" (default -1), "epsilon" (default 1e-5)
//     -> y, mean, rstd
//   LayerNormGrad(dy, x, gamma, mean, rstd), attrs "axis", "epsilon" -> dx, dgamma, dbeta
// Each row (the elements sharing the leading indices [0, axis)) is normalised by its own mean and
// biased variance: y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(variance + epsilon).
// gamma and beta have the normalised shape x.shape[axis:], and are float32 (float64 for float64
// x), as are mean and rstd, shaped x.shape[:axis]: a 16-bit x keeps its statistics in float32,
// and mixed-precision layers keep float32 parameters. mean and rstd spare the gradient the
// recomputation; epsilon must be positive (a zero would divide a constant row by zero) and
// finite. LayerNormGrad reads epsilon only for its own gradient, which recomputes rstd from x.
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/activation_attr.h"
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
  checked_relu_activation(ctx);
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
  const bool relu = checked_relu_activation(ctx);
  if (ctx.num_inputs() != (relu ? 6 : 5))
    ctx.fail(std::string("takes ") + (relu ? "6 inputs with activation \"relu\" (the activated y last)" : "5 inputs") +
             ", got " + std::to_string(ctx.num_inputs()));
  if (relu && (ctx.input_dtype(5) != ctx.input_dtype(1) || ctx.input_shape(5) != x))
    ctx.fail("the activated y " + std::string(dtype_name(ctx.input_dtype(5))) + " " + ctx.input_shape(5).to_string() +
             " does not match x " + std::string(dtype_name(ctx.input_dtype(1))) + " " + x.to_string());
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

// ---- Layer normalisation ----

// "1e-05", "-inf", "nan": std::to_string would print 1e-7 as 0.000000.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string shape_of(const InferContext& ctx, int i) {
  return std::string(dtype_name(ctx.input_dtype(i))) + " " + ctx.input_shape(i).to_string();
}

// The first normalised axis, in [0, rank): the attribute may count from the end.
int64_t layer_norm_axis(const InferContext& ctx, int x) {
  const int64_t axis = ctx.attrs().get_or<int64_t>("axis", -1);
  const int64_t rank = ctx.input_shape(x).rank();
  if (rank == 0 || axis < -rank || axis >= rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for x " + shape_of(ctx, x) + " of rank " +
             std::to_string(rank) +
             (rank ? " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")"
                   : ": a scalar has no axis to normalise over"));
  return axis < 0 ? axis + rank : axis;
}

void layer_norm_epsilon(const InferContext& ctx, int x) {
  const double eps = ctx.attrs().get_or<double>("epsilon", 1e-5);
  if (!(eps > 0) || !std::isfinite(eps))
    ctx.fail("epsilon must be positive and finite, got " + number(eps) + " (x " + shape_of(ctx, x) + ")");
}

// Dims [begin, end) of s.
Shape dims(const Shape& s, int64_t begin, int64_t end) {
  Shape out;
  for (int64_t i = begin; i < end; ++i) out.push_back(s[i]);
  return out;
}

// Whether a and b agree where both dims are known (graph mode infers with -1 dims).
bool compatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

// `want` with its unknown dims filled in from `other` (compatible with it).
Shape known_of(Shape want, const Shape& other) {
  for (int64_t i = 0; i < want.rank(); ++i)
    if (want[i] < 0) want[i] = other[i];
  return want;
}

// Input i, named `name`, must be of x's parameter dtype and of shape `want`; `what` says where
// `want` comes from.
void check_layer_norm_param(const InferContext& ctx, int i, const char* name, int x, const Shape& want,
                            const std::string& what) {
  const DType p = param_dtype(ctx.input_dtype(x));
  if (ctx.input_dtype(i) != p)
    ctx.fail(std::string(name) + " must be " + std::string(dtype_name(p)) + " for " +
             std::string(dtype_name(ctx.input_dtype(x))) + " x, got " + shape_of(ctx, i));
  if (!compatible(ctx.input_shape(i), want))
    ctx.fail(std::string(name) + " must have shape " + want.to_string() + " (" + what + "), got " +
             ctx.input_shape(i).to_string());
}

void infer_layer_norm(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  layer_norm_epsilon(ctx, 0);
  const int64_t axis = layer_norm_axis(ctx, 0);
  const Shape& x = ctx.input_shape(0);
  const DType p = param_dtype(ctx.input_dtype(0));
  const Shape normalised = dims(x, axis, x.rank());
  const std::string what = "the normalised shape: x " + x.to_string() + " from axis " +
                           std::to_string(ctx.attrs().get_or<int64_t>("axis", -1));
  check_layer_norm_param(ctx, 1, "gamma", 0, normalised, what);
  check_layer_norm_param(ctx, 2, "beta", 0, normalised, what);
  ctx.set_num_outputs(3);
  ctx.set_output(0, ctx.input_dtype(0), x);
  ctx.set_output(1, p, dims(x, 0, axis));
  ctx.set_output(2, p, dims(x, 0, axis));
}

void infer_layer_norm_grad(InferContext& ctx) {
  check_dtype_in(ctx, 1, kFloatingOrHalf);
  layer_norm_epsilon(ctx, 1);
  const int64_t axis = layer_norm_axis(ctx, 1);
  const Shape& x = ctx.input_shape(1);
  if (ctx.input_dtype(0) != ctx.input_dtype(1) || !compatible(ctx.input_shape(0), x))
    ctx.fail("the gradient dy " + shape_of(ctx, 0) + " does not match x " + shape_of(ctx, 1));
  const DType p = param_dtype(ctx.input_dtype(1));
  const Shape normalised = dims(x, axis, x.rank()), rows = dims(x, 0, axis);
  const std::string axis_text = " from axis " + std::to_string(ctx.attrs().get_or<int64_t>("axis", -1));
  check_layer_norm_param(ctx, 2, "gamma", 1, normalised, "the normalised shape: x " + x.to_string() + axis_text);
  check_layer_norm_param(ctx, 3, "mean", 1, rows, "x's rows: x " + x.to_string() + axis_text);
  check_layer_norm_param(ctx, 4, "rstd", 1, rows, "x's rows: x " + x.to_string() + axis_text);
  ctx.set_num_outputs(3);
  ctx.set_output(0, ctx.input_dtype(1), known_of(x, ctx.input_shape(0)));
  const Shape param = known_of(normalised, ctx.input_shape(2));
  ctx.set_output(1, p, param);
  ctx.set_output(2, p, param);
}

// The forward reads x once for the statistics and once to normalise (from cache for rows that
// fit), and writes y; the gradient reads dy and x twice and writes dx.
Cost layer_norm_cost(const InferContext& ctx) {
  const int64_t n = ctx.output(0).shape.num_elements();
  const double e = n > 0 ? static_cast<double>(n) : 0;
  return {8 * e, 3 * e * dtype_size(ctx.output(0).dtype)};
}

}  // namespace

void register_normalization_defs() {
  op_registry().add({.name = "FusedBatchNorm", .display = "fused_batch_norm", .min_inputs = 5, .max_inputs = 5,
                     .num_outputs = 4,
                     .attrs = {{"epsilon", AttrType::Float, false}, {"is_training", AttrType::Bool},
                               {"activation", AttrType::String, false}},
                     .infer = infer_batch_norm, .cost = batch_norm_cost});
  op_registry().add({.name = "FusedBatchNormGrad", .display = "fused_batch_norm_grad", .min_inputs = 5,
                     .max_inputs = 6, .num_outputs = 3,
                     .attrs = {{"epsilon", AttrType::Float, false}, {"is_training", AttrType::Bool},
                               {"activation", AttrType::String, false}},
                     .infer = infer_batch_norm_grad, .cost = batch_norm_cost});
  op_registry().add({.name = "LayerNorm", .display = "layer_norm", .min_inputs = 3, .max_inputs = 3,
                     .num_outputs = 3,
                     .attrs = {{"axis", AttrType::Int, false}, {"epsilon", AttrType::Float, false}},
                     .infer = infer_layer_norm, .cost = layer_norm_cost});
  op_registry().add({.name = "LayerNormGrad", .display = "layer_norm_grad", .min_inputs = 5, .max_inputs = 5,
                     .num_outputs = 3,
                     .attrs = {{"axis", AttrType::Int, false}, {"epsilon", AttrType::Float, false}},
                     .infer = infer_layer_norm_grad, .cost = layer_norm_cost});
}

}  // namespace weft::defs
