// SparseSoftmaxCrossEntropyWithLogits: per-example cross-entropy of logits [N, C] against
// integer labels [N], computed in one pass with a fused, numerically stable log-softmax.
// Output 0 is the loss [N]; output 1 the gradient with respect to the logits [N, C]
// (softmax - one_hot), which backprop reuses instead of recomputing the softmax.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_sparse_xent(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_dtype_in(ctx, 1, {DType::Int32, DType::Int64, DType::UInt8});
  const Shape& logits = ctx.input_shape(0);
  const Shape& labels = ctx.input_shape(1);
  if (logits.rank() != 2) ctx.fail("logits must have shape (batch, classes), got " + logits.to_string());
  if (labels.rank() != 1) ctx.fail("labels must have shape (batch,), got " + labels.to_string());
  if (logits[0] >= 0 && labels[0] >= 0 && logits[0] != labels[0])
    ctx.fail("logits " + logits.to_string() + " and labels " + labels.to_string() + " disagree on the batch size");
  ctx.set_num_outputs(2);
  ctx.set_output(0, ctx.input_dtype(0), Shape{logits[0]});
  ctx.set_output(1, ctx.input_dtype(0), logits);
}

}  // namespace

void register_loss_defs() {
  op_registry().add({.name = "SparseSoftmaxCrossEntropyWithLogits", .display = "sparse_softmax_cross_entropy",
                     .min_inputs = 2, .max_inputs = 2, .num_outputs = 2, .infer = infer_sparse_xent});
}

}  // namespace weft::defs
