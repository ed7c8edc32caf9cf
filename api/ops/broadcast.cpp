// Front-end of broadcast_to and its gradient (the sum over the stretched dims).
#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor broadcast_to(const Tensor& x, const Shape& shape, const SourceLocation& loc) {
  if (x.defined() && !x.is_symbolic() && x.shape() == shape) return x;
  static const OpDef& op = op_def("BroadcastTo");
  return dispatch1(op, {x}, {{"shape", shape}}, loc);
}

Tensor broadcast_like(const Tensor& x, const Tensor& like, const SourceLocation& loc) {
  if (like.shape().is_fully_defined()) return broadcast_to(x, like.shape(), loc);
  static const OpDef& op = op_def("BroadcastLike");
  return dispatch1(op, {x, like}, {}, loc);
}

Tensor reshape_like(const Tensor& x, const Tensor& like, const SourceLocation& loc) {
  if (like.shape().is_fully_defined()) return reshape(x, like.shape(), loc);
  static const OpDef& op = op_def("ReshapeLike");
  return dispatch1(op, {x, like}, {}, loc);
}

Tensor size_of(const Tensor& x, DType dtype, const SourceLocation& loc) {
  static const OpDef& op = op_def("Size");
  return dispatch1(op, {x}, {{"out_type", dtype}}, loc);
}

namespace {
std::vector<Tensor> broadcast_to_grad(const GradContext& g) { return {unbroadcast(g.grad(), g.input(0))}; }
std::vector<Tensor> reshape_like_grad(const GradContext& g) { return {reshape_like(g.grad(), g.input(0)), Tensor()}; }
std::vector<Tensor> broadcast_like_grad(const GradContext& g) { return {unbroadcast(g.grad(), g.input(0)), Tensor()}; }
}  // namespace

void register_broadcast_gradients() {
  register_gradient("BroadcastTo", broadcast_to_grad);
  register_gradient("BroadcastLike", broadcast_like_grad);
  register_gradient("ReshapeLike", reshape_like_grad);
}

}  // namespace weft
