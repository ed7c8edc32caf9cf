#include "api/nn/losses.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/nn/dtype_policy.h"
#include "api/ops/array.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"

namespace weft::nn {

namespace {
// Under a mixed dtype policy, losses are computed in float32 from 16-bit predictions (the model's
// outputs), as Keras's losses are: the log-sum-exp and the mean need float32's precision and
// range. Otherwise a 16-bit loss stays 16-bit, as the op itself is.
Tensor at_least_float32(const Tensor& x, const SourceLocation& loc) {
  const bool half = x.defined() && (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16);
  return half && dtype_policy().mixed ? cast(x, DType::Float32, loc) : x;
}
}  // namespace

Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const SourceLocation& loc) {
  static const OpDef& op = op_def("SparseSoftmaxCrossEntropyWithLogits");
  std::vector<Tensor> out = dispatch(op, std::vector<Tensor>{at_least_float32(logits, loc), labels}, {}, loc);
  return reduce_mean(out[0], {}, false, loc);
}

// y_true may broadcast to y_pred's shape, not beyond it: (N,) against (N, 1) would otherwise
// average an (N, N) matrix of every pair without a word.
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred_in, const SourceLocation& loc) {
  const Tensor y_pred = at_least_float32(y_pred_in, loc);
  Tensor diff = sub(y_pred, at_least_float32(y_true, loc), loc);
  const Shape& ds = diff.shape();
  const Shape& ps = y_pred.shape();
  bool grew = ds.rank() > ps.rank();
  for (int64_t i = 0; !grew && i < ps.rank(); ++i) grew = ps[i] == 1 && ds[i] != 1;
  if (grew)
    throw InvalidArgument("[mean_squared_error] y_true " + y_true.shape().to_string() + " and y_pred " +
                          ps.to_string() + " broadcast to " + ds.to_string() +
                          ", larger than the prediction; reshape one of them");
  return reduce_mean(square(diff, loc), {}, false, loc);
}

}  // namespace weft::nn

namespace weft {

namespace {

// d loss_i / d logits = backprop_i (softmax - one_hot), scaled by the incoming gradient of each
// example's loss. A gradient reaches output 1 (the backprop itself) only in higher-order
// differentiation, where a first gradient is differentiated again; output 1 is softmax minus a
// constant, so that gradient goes back through softmax's Jacobian: p * (G - sum(G * p)).
std::vector<Tensor> sparse_xent_grad(const GradContext& g) {
  Tensor scale = expand_dims(g.grad(0), 1);
  Tensor logits_grad = mul(g.output(1), scale);
  if (g.has_grad(1)) {
    Tensor p = softmax(g.input(0), 1);
    logits_grad = add(logits_grad, mul(p, sub(g.grad(1), reduce_sum(mul(g.grad(1), p), {1}, true))));
  }
  return {logits_grad, Tensor()};
}

}  // namespace

void register_loss_gradients() { register_gradient("SparseSoftmaxCrossEntropyWithLogits", sparse_xent_grad); }

}  // namespace weft
