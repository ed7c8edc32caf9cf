#include "api/nn/losses.h"

#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"

namespace weft::nn {

Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const SourceLocation& loc) {
  static const OpDef& op = op_def("SparseSoftmaxCrossEntropyWithLogits");
  std::vector<Tensor> out = dispatch(op, std::vector<Tensor>{logits, labels}, {}, loc);
  return reduce_mean(out[0]);
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred, const SourceLocation& loc) {
  return reduce_mean(square(sub(y_pred, y_true, loc), loc), {}, false, loc);
}

}  // namespace weft::nn

namespace weft {

namespace {

// d loss_i / d logits = backprop_i (softmax - one_hot), scaled by the incoming gradient of each
// example's loss. The gradient through output 1 (the backprop itself) is not needed by any loss
// and is not propagated.
std::vector<Tensor> sparse_xent_grad(const GradContext& g) {
  Tensor scale = expand_dims(g.grad(0), 1);
  return {mul(g.output(1), scale), Tensor()};
}

}  // namespace

void register_loss_gradients() { register_gradient("SparseSoftmaxCrossEntropyWithLogits", sparse_xent_grad); }

}  // namespace weft
