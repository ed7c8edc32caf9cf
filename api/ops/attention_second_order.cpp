// The gradient of ScaledDotProductAttentionGrad (second-order gradients through attention, e.g. a
// gradient penalty), composed of front-end ops so that it runs eagerly, under a further tape and
// traced. It materialises the [B, H, Sq, Sk] probabilities, which the fused kernels avoid: this
// is the rare path, as PyTorch's double backward through SDPA is.
//
// With S = scale Q K^T + bias, P = softmax(S) by rows, dP = dO V^T, d = rowsum(dP P),
// dS = P (dP - d), the Grad op returns dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO. For the
// gradients G_Q, G_K, G_V arriving at those, backprop through the same formulas gives
//   g_dS = scale (G_Q K^T + Q G_K^T)                   g_Q = scale dS G_K,  g_K = scale dS^T G_Q
//   g_dP = P (g_dS - rowsum(g_dS P))                   g_dO = P G_V + g_dP V,  g_V = g_dP^T dO
//   g_P  = dO G_V^T + g_dS (dP - d) - rowsum(g_dS P) dP
//   g_S  = P (g_P - rowsum(g_P P))                     g_Q += scale g_S K,  g_K += scale g_S^T Q
// These are total derivatives in (dO, Q, K, V); the op's out and lse inputs are functions of
// q, k, v already counted, so they (and the mask and the seed) get no gradient. P is recomputed
// from q and k, not from lse, so that a third order differentiates it too.
//
// With dropout, the forward is (P F) V, where F is the kernels' mask (0, or 1 / (1 - rate) where
// the Philox draw for the seed keeps an element), given as a tensor by AttentionDropoutMask. Then
// dP = (dO V^T) F and dV = (P F)^T dO, so F multiplies P G_V in g_dO, dO G_V^T in g_P, and g_dP
// before it reaches dO and V; the rest is unchanged (d = rowsum(dP P) with the masked dP).
#include <cstdint>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"
#include "runtime/error.h"

namespace weft {

namespace {

// The inputs of ScaledDotProductAttentionGrad.
enum : int { kDout = 0, kQ = 1, kK = 2, kV = 3, kMask = 6 };

// The scores of a hidden key before the softmax: finite, so that a row that sees no key gives
// finite numbers (zeroed after) rather than NaN, and far enough below any real score that
// exp(hidden - row max) is exactly zero in float32 and float64.
constexpr double kHidden = -1e30;

Tensor row_sum(const Tensor& x) { return reduce_sum(x, {-1}, true); }

// 1 where query i may see key j, 0 elsewhere, as the kernels decide (kernels/defs/attention.cpp):
// the mask, and when causal, keys 0 .. i + Sk - Sq. Broadcasts to [B, H, Sq, Sk]; undefined when
// every key is visible.
Tensor visibility(const GradContext& g, DType dt) {
  Tensor vis;
  if (g.attrs.get<bool>("causal")) {
    const int64_t sq = g.input(kQ).shape()[2], sk = g.input(kK).shape()[2];
    if (sq < 0 || sk < 0)
      throw InvalidArgument("[scaled_dot_product_attention_grad] the second-order gradient of causal attention needs "
                            "known sequence lengths, got q " + g.input(kQ).shape().to_string() + ", k " +
                            g.input(kK).shape().to_string());
    const Tensor rows = reshape(range<int64_t>(0, sq), Shape{sq, 1});
    const Tensor keys = reshape(range<int64_t>(0, sk), Shape{1, sk});
    vis = cast(less_equal(keys, add(rows, sk - sq)), dt);
  }
  if (g.attrs.get_or<bool>("has_mask", false)) {
    const Tensor m = cast(g.input(kMask), dt);
    vis = vis.defined() ? mul(vis, m) : m;
  }
  return vis;
}

// The dropout factors the kernels drew for this call (its seed is the last input), in q's dtype;
// undefined without dropout.
Tensor dropout_factors(const GradContext& g, const Tensor& q, const Tensor& k) {
  const double rate = g.attrs.get_or<double>("dropout", 0.0);
  if (rate <= 0) return Tensor();
  static const OpDef& op = op_def("AttentionDropoutMask");
  return dispatch(op, std::vector<Tensor>{q, k, g.input(static_cast<int>(g.inputs.size()) - 1)}, {{"dropout", rate}})[0];
}

std::vector<Tensor> attention_grad_grad(const GradContext& g) {
  std::vector<Tensor> result(g.inputs.size());
  const bool want_dout = g.needs(kDout), want_q = g.needs(kQ), want_k = g.needs(kK), want_v = g.needs(kV);
  const bool from_dq = g.has_grad(0), from_dk = g.has_grad(1), from_dv = g.has_grad(2);
  // dV = P^T dO has no V in it: G_V alone reaches only dO, q and k.
  const bool reaches = (from_dq || from_dk) ? want_dout || want_q || want_k || want_v
                                            : from_dv && (want_dout || want_q || want_k);
  if (!reaches) return result;

  // 16-bit inputs are worked in float32, as the kernels do.
  const DType in_dt = g.input(kQ).dtype();
  const DType dt = in_dt == DType::Float64 ? DType::Float64 : DType::Float32;
  auto work = [&](const Tensor& x) { return x.dtype() == dt ? x : cast(x, dt); };
  const Tensor dout = work(g.input(kDout)), q = work(g.input(kQ)), k = work(g.input(kK)), v = work(g.input(kV));
  const double scale = g.attrs.get<double>("scale");
  const Tensor g_dq = from_dq ? work(g.grad(0)) : Tensor(), g_dk = from_dk ? work(g.grad(1)) : Tensor();
  const Tensor g_dv = from_dv ? work(g.grad(2)) : Tensor();

  Tensor s = mul(matmul(q, k, false, true), scale);
  const Tensor vis = visibility(g, dt);
  if (vis.defined()) s = add(s, mul(sub(1.0, vis), kHidden));
  Tensor p = softmax(s, -1);
  if (vis.defined()) p = mul(p, vis);  // hidden keys, and every key of a row that sees none, get 0
  // With dropout, the kernels' mask F (0 or 1 / (1 - rate)) as a tensor: the forward used P F,
  // and dP is (dO V^T) F.
  const Tensor keep = dropout_factors(g, q, k);
  auto dropped = [&](const Tensor& x) { return keep.defined() ? mul(x, keep) : x; };

  // The first-order quantities the gradient needs: dP, d and dS.
  const bool via_scores = from_dq || from_dk;
  Tensor dp, centred, ds;
  if (via_scores) {
    dp = dropped(matmul(dout, v, false, true));
    centred = sub(dp, row_sum(mul(dp, p)));
    ds = mul(p, centred);
  }

  Tensor gq, gk, gv, gdout;
  auto accumulate = [](Tensor& to, const Tensor& x) { to = to.defined() ? add(to, x) : x; };

  // Through dQ = scale dS K and dK = scale dS^T Q, with K and Q held.
  Tensor gds;
  if (from_dq) {
    gds = mul(matmul(g_dq, k, false, true), scale);
    if (want_k) accumulate(gk, mul(matmul(ds, g_dq, true, false), scale));
  }
  if (from_dk) {
    accumulate(gds, mul(matmul(q, g_dk, false, true), scale));
    if (want_q) accumulate(gq, mul(matmul(ds, g_dk), scale));
  }

  // Through dV = (P F)^T dO with P held, then dS = P (dP - d) with P held; gp gathers what
  // reaches P.
  Tensor gp;
  if (from_dv) {
    if (want_dout) accumulate(gdout, matmul(dropped(p), g_dv));
    if (want_q || want_k) gp = dropped(matmul(dout, g_dv, false, true));
  }
  if (gds.defined()) {
    const Tensor gds_p = mul(gds, p);
    const Tensor gdelta = row_sum(gds_p);
    if (want_q || want_k) accumulate(gp, sub(mul(gds, centred), mul(gdelta, dp)));
    if (want_dout || want_v) {
      // P (g_dS - rowsum(g_dS P)), then through dP = (dO V^T) F.
      const Tensor gdp = dropped(sub(gds_p, mul(gdelta, p)));
      if (want_dout) accumulate(gdout, matmul(gdp, v));
      if (want_v) gv = matmul(gdp, dout, true, false);
    }
  }

  // Through P = softmax(S) into the scores S = scale Q K^T.
  if (gp.defined()) {
    const Tensor gs = mul(p, sub(gp, row_sum(mul(gp, p))));
    if (want_q) accumulate(gq, mul(matmul(gs, k), scale));
    if (want_k) accumulate(gk, mul(matmul(gs, q, true, false), scale));
  }

  auto back = [&](const Tensor& x) { return !x.defined() || x.dtype() == in_dt ? x : cast(x, in_dt); };
  result[kDout] = back(gdout);
  result[kQ] = back(gq);
  result[kK] = back(gk);
  result[kV] = back(gv);
  return result;
}

}  // namespace

void register_attention_second_order_gradients() {
  register_gradient("ScaledDotProductAttentionGrad", attention_grad_grad);
}

}  // namespace weft
