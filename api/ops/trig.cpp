// Front-ends of Sin and Cos and, below them, their gradients.
#include "api/ops/trig.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/math.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor sin(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Sin");
  return dispatch1(op, {x}, {}, loc);
}

Tensor cos(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Cos");
  return dispatch1(op, {x}, {}, loc);
}

// ---- gradients -------------------------------------------------------------------------------

namespace {

// From the input rather than the output, so the gradients are differentiable again.
std::vector<Tensor> sin_grad(const GradContext& g) { return {mul(g.grad(), cos(g.input(0)))}; }
std::vector<Tensor> cos_grad(const GradContext& g) { return {neg(mul(g.grad(), sin(g.input(0))))}; }

}  // namespace

void register_trig_gradients() {
  register_gradient("Sin", sin_grad);
  register_gradient("Cos", cos_grad);
}

}  // namespace weft
