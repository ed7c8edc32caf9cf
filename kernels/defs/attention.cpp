// Definitions of scaled dot-product attention as one op and its gradient:
//
//   ScaledDotProductAttention(q, k, v [, mask] [, seed]) -> out, lse
//   ScaledDotProductAttentionGrad(dout, q, k, v, out, lse [, mask] [, seed]) -> dq, dk, dv
//   AttentionDropoutMask(q, k, seed) -> factors     attr: "dropout" (float in (0, 1))
//   attrs: "scale" (float > 0), "causal" (bool), "has_mask" (bool), "dropout" (float in [0, 1))
//
// q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv]; out [B, H, Sq, Dv] =
// dropout(softmax(q k^T scale + bias)) v, where bias is -inf where the mask is false and, when
// causal, above the diagonal aligned to the bottom right: query i sits at position i + Sk - Sq of
// the keys and sees keys 0 .. i + Sk - Sq (FlashAttention's rule; with Sq = Sk the usual lower
// triangle, and a query block appended to a key-value cache sees the whole cache). The mask is
// bool, true = keep, and broadcasts to [B, H, Sq, Sk]. A row that sees no key gives zeros.
// lse [B, H, Sq] (float32, float64 for float64) is each row's log-sum-exp of the scaled, masked
// scores, kept for the gradient, -inf for a row that sees no key. With dropout > 0 the last input
// is an int64 scalar seed: the kept probabilities are those whose Philox draw for (seed, element
// index) is at least `dropout`, scaled by 1 / (1 - dropout); the gradient redraws the same mask.
//
// AttentionDropoutMask gives that mask as a tensor, [B, H, Sq, Sk] in q's dtype (float32 or
// float64): 1 / (1 - dropout) where the fused kernels keep a probability for this seed, 0 where
// they drop it. q and k only give the shape. The second-order gradient of attention with dropout
// (api/ops/attention_second_order.cpp) is composed of ops and needs the very mask the kernels drew.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

DType stats_dtype(DType x) { return x == DType::Float64 ? DType::Float64 : DType::Float32; }

struct Layout {
  int mask = -1, seed = -1;  // input indices, -1 when absent
  int count = 0;             // inputs expected
};

// Where the optional inputs sit after the `fixed` leading ones, from the attributes.
Layout layout_of(const InferContext& ctx, int fixed) {
  const double scale = ctx.attrs().get<double>("scale");
  if (!(scale > 0) || scale == scale + 1) ctx.fail("scale must be a finite number > 0, got " + std::to_string(scale));
  const double dropout = ctx.attrs().get_or<double>("dropout", 0.0);
  if (!(dropout >= 0 && dropout < 1)) ctx.fail("dropout must be in [0, 1), got " + std::to_string(dropout));
  ctx.attrs().get<bool>("causal");
  Layout l;
  l.count = fixed;
  if (ctx.attrs().get_or<bool>("has_mask", false)) l.mask = l.count++;
  if (dropout > 0) l.seed = l.count++;
  if (ctx.num_inputs() != l.count)
    ctx.fail("expects " + std::to_string(l.count) + " inputs for these attributes (mask " +
             (l.mask >= 0 ? "given" : "absent") + ", dropout " + std::to_string(dropout) + "), got " +
             std::to_string(ctx.num_inputs()));
  return l;
}

bool known(int64_t d) { return d >= 0; }
bool agree(int64_t a, int64_t b) { return !known(a) || !known(b) || a == b; }

// Checks q, k, v (inputs first .. first + 2) and the mask and seed; returns q's shape with v's
// last dim, the output's.
Shape check_qkv(const InferContext& ctx, int first, const Layout& l) {
  check_dtype_in(ctx, first, kFloatingOrHalf);
  check_same_dtype(ctx, first, first + 2);
  const Shape& q = ctx.input_shape(first);
  const Shape& k = ctx.input_shape(first + 1);
  const Shape& v = ctx.input_shape(first + 2);
  const std::string shapes = "q " + q.to_string() + ", k " + k.to_string() + ", v " + v.to_string();
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    ctx.fail("q, k and v must be [batch, heads, seq, head_dim], got " + shapes);
  if (!agree(q[0], k[0]) || !agree(q[0], v[0]) || !agree(q[1], k[1]) || !agree(q[1], v[1]))
    ctx.fail("q, k and v must have the same batch and heads, got " + shapes);
  if (!agree(q[3], k[3])) ctx.fail("q and k must have the same head_dim, got " + shapes);
  if (!agree(k[2], v[2])) ctx.fail("k and v must have the same sequence length, got " + shapes);
  if (l.mask >= 0) {
    if (ctx.input_dtype(l.mask) != DType::Bool)
      ctx.fail("the mask must be bool (true = keep), got " + std::string(dtype_name(ctx.input_dtype(l.mask))));
    const Shape& m = ctx.input_shape(l.mask);
    const Shape full{q[0], q[1], q[2], k[2]};
    bool fits = m.rank() <= 4;
    for (int64_t d = 0; fits && d < m.rank(); ++d) {
      const int64_t md = m[d], fd = full[4 - m.rank() + d];
      fits = md == 1 || agree(md, fd);
    }
    if (!fits)
      ctx.fail("the mask " + m.to_string() + " does not broadcast to [batch, heads, q_seq, k_seq] " +
               full.to_string() + " (" + shapes + ")");
  }
  if (l.seed >= 0 && (ctx.input_dtype(l.seed) != DType::Int64 || ctx.input_shape(l.seed).rank() != 0))
    ctx.fail("the dropout seed must be an int64 scalar, got " + std::string(dtype_name(ctx.input_dtype(l.seed))) +
             " " + ctx.input_shape(l.seed).to_string());
  return Shape{q[0], q[1], q[2], v[3]};
}

void infer_attention(InferContext& ctx) {
  const Layout l = layout_of(ctx, 3);
  const Shape out = check_qkv(ctx, 0, l);
  ctx.set_num_outputs(2);
  ctx.set_output(0, ctx.input_dtype(0), out);
  ctx.set_output(1, stats_dtype(ctx.input_dtype(0)), Shape{out[0], out[1], out[2]});
}

void infer_attention_grad(InferContext& ctx) {
  const Layout l = layout_of(ctx, 6);
  const Shape out = check_qkv(ctx, 1, l);
  check_same_dtype(ctx, 0, 1);
  check_same_dtype(ctx, 3, 4);
  for (int i : {0, 4}) {
    const Shape& s = ctx.input_shape(i);
    bool same = s.rank() == 4;
    for (int64_t d = 0; same && d < 4; ++d) same = agree(s[d], out[d]);
    if (!same)
      ctx.fail(std::string(i == 0 ? "the gradient dout " : "the forward output ") + s.to_string() +
               " does not match the attention output " + out.to_string());
  }
  const Shape& lse = ctx.input_shape(5);
  if (lse.rank() != 3 || ctx.input_dtype(5) != stats_dtype(ctx.input_dtype(1)))
    ctx.fail("lse must be the forward's [batch, heads, q_seq] statistics, got " +
             std::string(dtype_name(ctx.input_dtype(5))) + " " + lse.to_string());
  ctx.set_num_outputs(3);
  for (int i = 0; i < 3; ++i) ctx.set_output(i, ctx.input_dtype(1), ctx.input_shape(1 + i));
}

void infer_dropout_mask(InferContext& ctx) {
  const double dropout = ctx.attrs().get<double>("dropout");
  if (!(dropout > 0 && dropout < 1)) ctx.fail("dropout must be in (0, 1), got " + std::to_string(dropout));
  check_dtype_in(ctx, 0, kFloating);
  check_same_dtype(ctx, 0, 1);
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  if (q.rank() != 4 || k.rank() != 4 || !agree(q[0], k[0]) || !agree(q[1], k[1]))
    ctx.fail("q and k must be [batch, heads, seq, head_dim] with the same batch and heads, got q " + q.to_string() +
             ", k " + k.to_string());
  if (ctx.input_dtype(2) != DType::Int64 || ctx.input_shape(2).rank() != 0)
    ctx.fail("the dropout seed must be an int64 scalar, got " + std::string(dtype_name(ctx.input_dtype(2))) + " " +
             ctx.input_shape(2).to_string());
  ctx.set_output(0, ctx.input_dtype(0), Shape{q[0], q[1], q[2], k[2]});
}

// Two products of B H Sq Sk (D + Dv) multiply-adds (halved when causal); reads q, k, v once per
// query block of 64 rows, writes the output once.
Cost attention_cost(const InferContext& ctx) {
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  if (q.rank() != 4 || k.rank() != 4) return {};
  const double b = static_cast<double>(std::max<int64_t>(q[0], 1) * std::max<int64_t>(q[1], 1));
  const double sq = static_cast<double>(std::max<int64_t>(q[2], 1)), sk = static_cast<double>(std::max<int64_t>(k[2], 1));
  const double d = static_cast<double>(std::max<int64_t>(q[3], 1));
  const double flops = 4 * b * sq * sk * d * (ctx.attrs().get_or<bool>("causal", false) ? 0.5 : 1.0);
  const double bytes = b * (sq * d * 2 + sk * d * 2 * (sq / 64 + 1)) * dtype_size(ctx.input_dtype(0));
  return {flops, bytes};
}

Cost attention_grad_cost(const InferContext& ctx) {
  // The gradient recomputes the scores twice (once for dk/dv, once for dq) and makes five
  // products in all, against the forward's two.
  const Shape& q = ctx.input_shape(1);
  const Shape& k = ctx.input_shape(2);
  if (q.rank() != 4 || k.rank() != 4) return {};
  const double b = static_cast<double>(std::max<int64_t>(q[0], 1) * std::max<int64_t>(q[1], 1));
  const double sq = static_cast<double>(std::max<int64_t>(q[2], 1)), sk = static_cast<double>(std::max<int64_t>(k[2], 1));
  const double d = static_cast<double>(std::max<int64_t>(q[3], 1));
  return {14 * b * sq * sk * d * (ctx.attrs().get_or<bool>("causal", false) ? 0.5 : 1.0),
          b * (sq + sk) * d * 8 * dtype_size(ctx.input_dtype(1))};
}

}  // namespace

void register_attention_defs() {
  const std::vector<AttrSpec> attrs = {{"scale", AttrType::Float},
                                      {"causal", AttrType::Bool},
                                      {"has_mask", AttrType::Bool, false},
                                      {"dropout", AttrType::Float, false}};
  op_registry().add({.name = "ScaledDotProductAttention", .display = "scaled_dot_product_attention",
                     .min_inputs = 3, .max_inputs = 5, .num_outputs = 2, .attrs = attrs, .infer = infer_attention,
                     .cost = attention_cost});
  op_registry().add({.name = "ScaledDotProductAttentionGrad", .display = "scaled_dot_product_attention_grad",
                     .min_inputs = 6, .max_inputs = 8, .num_outputs = 3, .attrs = attrs,
                     .infer = infer_attention_grad, .cost = attention_grad_cost});
  op_registry().add({.name = "AttentionDropoutMask", .display = "attention_dropout_mask", .min_inputs = 3,
                     .max_inputs = 3, .attrs = {{"dropout", AttrType::Float}}, .infer = infer_dropout_mask,
                     .flags = kNotDifferentiable});
}

}  // namespace weft::defs
