// Front-end of broadcast_to and its gradient (the sum over the stretched dims).
#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor broadcast_to(const Tensor& x, const Shape& shape, const SourceLocation& loc) {
  if (x.defined() && !x.is_symbolic() && x.shape() == shape) return x;
  static const OpDef& op = op_def("BroadcastTo");
  return dispatch1(op, {x}, {{"shape", shape}}, loc);
}

namespace {
std::vector<Tensor> broadcast_to_grad(const GradContext& g) { return {unbroadcast(g.grad(), g.input(0))}; }
}  // namespace

void register_broadcast_gradients() { register_gradient("BroadcastTo", broadcast_to_grad); }

}  // namespace weft
