// The batch-norm and layer-norm front-ends and the gradients of FusedBatchNorm,
// FusedBatchNormGrad, LayerNorm and LayerNormGrad.
//
// As TensorFlow does, gradients reaching batch_mean and batch_variance (e.g. through the moving
// averages a layer keeps) are not propagated, although in training both are functions of x: they
// feed running statistics, not the loss. Only y's gradient flows back.
//
// FusedBatchNormGrad's own gradient (for second order) is composed of front-end ops (reductions,
// elementwise math), so any number of nested tapes differentiate through it. In training it
// recomputes the batch mean and variance from x with front-end ops, as TensorFlow's does, so the
// statistics' dependence on x is seen by outer tapes; FusedBatchNormGrad's saved_mean and
// saved_inv_std inputs then get no gradient (FusedBatchNorm's gradient drops those outputs' grads
// anyway, so the two rules agree).
//
// Layer norm follows the same rules: LayerNorm's gradient is LayerNormGrad, fed the mean and
// rstd the forward saved (gradients reaching those two outputs, which layer_norm does not
// return, are dropped); LayerNormGrad's gradient is composed of front-end ops and recomputes
// the row statistics from x, so its mean and rstd inputs get none.
#include "api/ops/normalization.h"

#include <vector>

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"
#include "runtime/error.h"

namespace weft {

BatchNormResult fused_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                 const Tensor& variance, double epsilon, bool training, const SourceLocation& loc) {
  static const OpDef& op = op_def("FusedBatchNorm");
  if (!x.defined() || !gamma.defined() || !beta.defined())
    throw InvalidArgument("[fused_batch_norm] x, gamma and beta are required");
  if (!training && (!mean.defined() || !variance.defined()))
    throw InvalidArgument("[fused_batch_norm] inference (training = false) needs the mean and variance to normalise by");
  // Training does not read the statistics: missing ones are empty vectors the definition accepts.
  const DType p = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor m = mean.defined() ? mean : zeros(Shape{0}, p, loc);
  const Tensor v = variance.defined() ? variance : zeros(Shape{0}, p, loc);
  std::vector<Tensor> out =
      dispatch(op, std::vector<Tensor>{x, gamma, beta, m, v}, {{"epsilon", epsilon}, {"is_training", training}}, loc);
  return {out[0], out[1], out[2]};
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis, double epsilon,
                  const SourceLocation& loc) {
  static const OpDef& op = op_def("LayerNorm");
  if (!x.defined() || !gamma.defined() || !beta.defined())
    throw InvalidArgument("[layer_norm] x, gamma and beta are required");
  return dispatch(op, std::vector<Tensor>{x, gamma, beta}, {{"axis", axis}, {"epsilon", epsilon}}, loc)[0];
}

namespace {

std::vector<Tensor> batch_norm_grad_op(const Tensor& dy, const Tensor& x, const Tensor& scale, const Tensor& mean,
                                       const Tensor& inv_std, bool training, double epsilon) {
  static const OpDef& op = op_def("FusedBatchNormGrad");
  return dispatch(op, std::vector<Tensor>{dy, x, scale, mean, inv_std},
                  {{"epsilon", epsilon}, {"is_training", training}});
}

std::vector<int64_t> reduced_axes(const Tensor& x) {
  return x.shape().rank() == 2 ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1, 2};
}

// Inputs (x, scale, offset, mean, variance). Training: the batch statistics the op returned.
// Inference: the given mean and 1 / sqrt(variance + epsilon) recomputed with front-end ops, so
// that outer tapes see y's dependence on the given statistics.
std::vector<Tensor> batch_norm_grad(const GradContext& g) {
  const bool training = g.attrs.get<bool>("is_training");
  const double eps = g.attrs.get_or<double>("epsilon", 1e-3);
  if (training) {
    std::vector<Tensor> d = batch_norm_grad_op(g.grad(0), g.input(0), g.input(1), g.output(1), g.output(3), true, eps);
    return {d[0], d[1], d[2], Tensor(), Tensor()};
  }
  const Tensor& scale = g.input(1);
  const Tensor inv = rsqrt(add(g.input(4), eps));
  std::vector<Tensor> d = batch_norm_grad_op(g.grad(0), g.input(0), scale, g.input(3), inv, false, eps);
  // y = scale * (x - mean) * inv + offset: dy/dmean = -scale * inv, dy/dvariance = -scale * inv^2 * xhat / 2.
  Tensor dmean, dvar;
  if (g.needs(3)) dmean = neg(mul(mul(scale, inv), d[2]));
  if (g.needs(4)) dvar = mul(mul(mul(scale, square(inv)), d[1]), -0.5);
  return {d[0], d[1], d[2], dmean, dvar};
}

// Inputs (dy, x, scale, saved_mean, saved_inv_std), outputs (dx, dscale, doffset) with incoming
// gradients a, b, c. Per channel, with means over the M reduced elements and xhat = (x - mean) * r:
//   training (dx = scale * r * (dy - mean(dy) - xhat * mean(dy * xhat))):
//     d dy    = scale * r * (a - mean(a) - xhat * mean(a * xhat)) + b * xhat + c
//     d scale = sum(r * a * (dy - mean(dy) - xhat * mean(dy * xhat)))
//     d x     = r * (G - mean(G) - xhat * mean(G * xhat)) - R * r^2 * xhat, where
//               G = (b - scale * r * mean(a * xhat)) * dy - scale * r * mean(dy * xhat) * a is the
//               gradient reaching xhat, and R = scale * (mean(a * dy) - mean(dy) * mean(a) -
//               mean(dy * xhat) * mean(a * xhat)) the one reaching r (over M), r being a function of x.
//   inference (dx = dy * scale * r; mean and r given):
//     d dy = a * scale * r + b * xhat + c;  d x = b * dy * r;  d scale = r * sum(a * dy);
//     d mean = -b * r * sum(dy);  d r = scale * sum(a * dy) + b * sum(dy * (x - mean)).
// 16-bit dy and x are computed in float32, their gradients rounded back.
std::vector<Tensor> batch_norm_grad_grad(const GradContext& g) {
  const bool training = g.attrs.get<bool>("is_training");
  const double eps = g.attrs.get_or<double>("epsilon", 1e-3);
  const DType xd = g.input(1).dtype();
  const bool half = xd == DType::Float16 || xd == DType::BFloat16;
  auto wide = [&](const Tensor& t) { return half ? cast(t, DType::Float32) : t; };
  auto narrow = [&](const Tensor& t) { return half ? cast(t, xd) : t; };
  const Tensor dy = wide(g.input(0)), x = wide(g.input(1)), a = wide(g.grad(0));
  const Tensor& scale = g.input(2);
  const Tensor& b = g.grad(1);
  const Tensor& c = g.grad(2);
  const std::vector<int64_t> axes = reduced_axes(x);
  auto mean_of = [&](const Tensor& t) { return reduce_mean(t, axes, true); };
  if (!training) {
    const Tensor& mu = g.input(3);
    const Tensor& r = g.input(4);
    const Tensor xc = sub(x, mu);
    const Tensor xh = mul(xc, r);
    const Tensor ddy = add(add(mul(a, mul(scale, r)), mul(b, xh)), c);
    const Tensor dx = mul(mul(b, dy), r);
    const Tensor sum_ag = reduce_sum(mul(a, dy), axes);
    const Tensor dscale = mul(r, sum_ag);
    const Tensor dmean = neg(mul(mul(b, r), reduce_sum(dy, axes)));
    const Tensor dr = add(mul(scale, sum_ag), mul(b, reduce_sum(mul(dy, xc), axes)));
    return {narrow(ddy), narrow(dx), dscale, dmean, dr};
  }
  const Tensor mu = mean_of(x);
  const Tensor xc = sub(x, mu);
  const Tensor r = rsqrt(add(mean_of(square(xc)), eps));
  const Tensor xh = mul(xc, r);
  const Tensor sr = mul(scale, r);
  const Tensor mean_a = mean_of(a), mean_g = mean_of(dy);
  const Tensor m_ax = mean_of(mul(a, xh)), m_gx = mean_of(mul(dy, xh));
  const Tensor ddy = add(add(mul(sr, sub(sub(a, mean_a), mul(xh, m_ax))), mul(b, xh)), c);
  const Tensor dscale = reduce_sum(mul(mul(r, a), sub(sub(dy, mean_g), mul(xh, m_gx))), axes);
  const Tensor big_g = sub(mul(sub(b, mul(sr, m_ax)), dy), mul(mul(sr, m_gx), a));
  const Tensor r_over_m = mul(scale, sub(sub(mean_of(mul(a, dy)), mul(mean_g, mean_a)), mul(m_gx, m_ax)));
  const Tensor dx = sub(mul(r, sub(sub(big_g, mean_of(big_g)), mul(xh, mean_of(mul(big_g, xh))))),
                        mul(mul(r_over_m, square(r)), xh));
  return {narrow(ddy), narrow(dx), dscale, Tensor(), Tensor()};
}

// ---- Layer norm ----

// The first normalised axis of x, in [0, rank) (the definitions checked it).
int64_t layer_axis(const GradContext& g, const Tensor& x) {
  const int64_t axis = g.attrs.get_or<int64_t>("axis", -1);
  return axis < 0 ? axis + x.rank() : axis;
}

// Inputs (x, gamma, beta); outputs (y, mean, rstd).
std::vector<Tensor> layer_norm_grad(const GradContext& g) {
  static const OpDef& op = op_def("LayerNormGrad");
  const Tensor& x = g.input(0);
  const Attrs attrs{{"axis", layer_axis(g, x)}, {"epsilon", g.attrs.get_or<double>("epsilon", 1e-5)}};
  std::vector<Tensor> d =
      dispatch(op, std::vector<Tensor>{g.grad(0), x, g.input(1), g.output(1), g.output(2)}, attrs);
  return {d[0], d[1], d[2]};
}

// Inputs (dy, x, gamma, mean, rstd), outputs (dx, dgamma, dbeta) with incoming gradients a, b, c.
// Per row, with means over the N normalised elements, xhat = (x - mean) * r, g = dy * gamma and
// dx = r * P(g), P(v) = v - mean(v) - xhat * mean(v * xhat) (a symmetric projection):
//   d dy    = gamma * r * P(a) + b * xhat + c
//   d gamma = sum over rows of dy * r * P(a)
//   d x     = r * (G - mean(G) - xhat * mean(G * xhat)) - R * r^2 * xhat, where
//             G = b * dy - r * (mean(g * xhat) * a + mean(a * xhat) * g) is the gradient reaching
//             xhat, and R = mean(a * g) - mean(a) * mean(g) - mean(a * xhat) * mean(g * xhat) the
//             one reaching r (over N), the row's mean and r being functions of x.
// These are batch norm's training formulas (above) with the roles of the axes swapped and the
// scale inside the row. 16-bit dy and x are computed in float32, their gradients rounded back.
std::vector<Tensor> layer_norm_grad_grad(const GradContext& g) {
  const double eps = g.attrs.get_or<double>("epsilon", 1e-5);
  const DType xd = g.input(1).dtype();
  const bool half = xd == DType::Float16 || xd == DType::BFloat16;
  auto wide = [&](const Tensor& t) { return half ? cast(t, DType::Float32) : t; };
  auto narrow = [&](const Tensor& t) { return half ? cast(t, xd) : t; };
  const Tensor dy = wide(g.input(0)), x = wide(g.input(1)), a = wide(g.grad(0));
  const Tensor& gamma = g.input(2);
  const Tensor& b = g.grad(1);
  const Tensor& c = g.grad(2);
  const int64_t axis = layer_axis(g, x);
  std::vector<int64_t> normalised, rows;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : normalised).push_back(i);
  auto mean_of = [&](const Tensor& t) { return reduce_mean(t, normalised, true); };
  // With no row axes there is one row (and an empty list would reduce over every axis).
  auto sum_rows = [&](const Tensor& t) { return rows.empty() ? t : reduce_sum(t, rows); };
  const Tensor xc = sub(x, mean_of(x));
  const Tensor r = rsqrt(add(mean_of(square(xc)), eps));
  const Tensor xh = mul(xc, r);
  const Tensor gg = mul(dy, gamma);
  const Tensor m_a = mean_of(a), m_ax = mean_of(mul(a, xh));
  const Tensor m_g = mean_of(gg), m_gx = mean_of(mul(gg, xh));
  const Tensor pa = sub(sub(a, m_a), mul(xh, m_ax));
  const Tensor ddy = add(add(mul(mul(gamma, r), pa), mul(b, xh)), c);
  const Tensor dgamma = sum_rows(mul(mul(dy, r), pa));
  const Tensor big_g = sub(mul(b, dy), mul(r, add(mul(m_gx, a), mul(m_ax, gg))));
  const Tensor big_r = sub(sub(mean_of(mul(a, gg)), mul(m_a, m_g)), mul(m_ax, m_gx));
  const Tensor dx = sub(mul(r, sub(sub(big_g, mean_of(big_g)), mul(xh, mean_of(mul(big_g, xh))))),
                        mul(mul(big_r, square(r)), xh));
  return {narrow(ddy), narrow(dx), dgamma, Tensor(), Tensor()};
}

}  // namespace

void register_normalization_gradients() {
  register_gradient("FusedBatchNorm", batch_norm_grad);
  register_gradient("FusedBatchNormGrad", batch_norm_grad_grad);
  register_gradient("LayerNorm", layer_norm_grad);
  register_gradient("LayerNormGrad", layer_norm_grad_grad);
}

}  // namespace weft
