// The attention front-end and the gradient of ScaledDotProductAttention (its gradient's gradient
// is in attention_second_order.cpp).
#include "api/ops/attention.h"

#include <cmath>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/random.h"
#include "api/ops/register_gradients.h"
#include "runtime/error.h"

namespace weft {

namespace {

// The op's attributes and inputs after q, k, v: [mask] [seed].
struct Call {
  Attrs attrs;
  std::vector<Tensor> extra;
};

Call call_of(const Tensor& q, const AttentionOptions& o, const SourceLocation& loc) {
  Call c;
  double scale = 0;
  if (o.scale) {
    scale = *o.scale;
  } else {
    if (q.shape().rank() != 4 || q.shape()[3] <= 0)
      throw InvalidArgument("[scaled_dot_product_attention] q must be [batch, heads, seq, head_dim] with a known "
                            "head_dim to derive the default scale, got " + q.shape().to_string());
    scale = 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  }
  c.attrs = {{"scale", scale}, {"causal", o.causal}, {"has_mask", o.mask.defined()}, {"dropout", o.dropout}};
  if (o.mask.defined()) c.extra.push_back(o.mask);
  if (o.dropout > 0) {
    // A fresh seed per call unless one is given: a stateful draw, so a traced step draws anew on
    // every run, as unseeded dropout does everywhere else in weft.
    c.extra.push_back(o.seed ? constant(static_cast<int64_t>(*o.seed))
                             : cast(random::uniform({}, 0, 9.0e15, -1, DType::Float64, loc), DType::Int64, loc));
  }
  return c;
}

std::vector<Tensor> attention_grad(const GradContext& g) {
  static const OpDef& op = op_def("ScaledDotProductAttentionGrad");
  std::vector<Tensor> in = {g.grad(0), g.input(0), g.input(1), g.input(2), g.output(0), g.output(1)};
  for (size_t i = 3; i < g.inputs.size(); ++i) in.push_back(g.input(static_cast<int>(i)));
  std::vector<Tensor> d = dispatch(op, in, g.attrs);
  std::vector<Tensor> out = {d[0], d[1], d[2]};
  out.resize(g.inputs.size());  // the mask and the seed get none
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options, const SourceLocation& loc) {
  static const OpDef& op = op_def("ScaledDotProductAttention");
  Call c = call_of(q, options, loc);
  std::vector<Tensor> in = {q, k, v};
  in.insert(in.end(), c.extra.begin(), c.extra.end());
  return dispatch(op, in, c.attrs, loc)[0];
}

void register_attention_gradients() {
  register_gradient("ScaledDotProductAttention", attention_grad);
  register_attention_second_order_gradients();
}

}  // namespace weft
