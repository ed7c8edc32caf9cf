// Front-ends of the activation ops. Their gradients will sit beside them here.
#include "api/ops/nn.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor relu(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Relu");
  return dispatch1(op, {x}, {}, loc);
}

Tensor sigmoid(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Sigmoid");
  return dispatch1(op, {x}, {}, loc);
}

Tensor tanh(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Tanh");
  return dispatch1(op, {x}, {}, loc);
}

// The exact GELU is one op, Gelu: (x * 0.5) * (erf(x * sqrt(1/2)) + 1) in one pass, with the
// bits of those four ops run one by one (vector_math.h). The tanh approximation stays composed.
Tensor gelu(const Tensor& x, bool approximate, const SourceLocation& loc) {
  if (!approximate) {
    static const OpDef& op = op_def("Gelu");
    return dispatch1(op, {x}, {}, loc);
  }
  const Tensor half_x = mul(x, 0.5, loc);
  const Tensor cubic = mul(mul(x, square(x, loc), loc), 0.044715, loc);
  return mul(half_x, add(tanh(mul(add(x, cubic, loc), 0.7978845608028654, loc), loc), 1.0, loc), loc);
}

Tensor softmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("Softmax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

Tensor log_softmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("LogSoftmax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

}  // namespace weft

namespace weft {

namespace {

Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  static const OpDef& op = op_def("ReluGrad");
  return dispatch1(op, {dy, x});
}
// The mask comes from relu's output, positive exactly where its input is: the pre-activation then
// has no reader but the relu, so a layer's MatMul, bias and relu fuse into one FusedMatMul in
// training graphs too (the fusion pass needs the bias-add's output read by the relu alone), and
// the tape keeps one tensor per layer instead of two.
std::vector<Tensor> relu_grad(const GradContext& g) { return {relu_backward(g.grad(), g.output(0))}; }
// ReluGrad is linear in dy (same mask again) and piecewise constant in its mask input.
std::vector<Tensor> relu_grad_grad(const GradContext& g) {
  return {relu_backward(g.grad(), g.input(1)), zeros_like(g.input(1))};
}
// d/dx x Phi(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2, phi(x) = e^{-x^2/2} / sqrt(2 pi);
// front-end ops, so that the gradient is differentiable in turn.
std::vector<Tensor> gelu_grad(const GradContext& g) {
  const Tensor& x = g.input(0);
  const Tensor cdf = mul(add(erf(mul(x, 0.7071067811865476)), 1.0), 0.5);
  const Tensor pdf = mul(exp(mul(square(x), -0.5)), 0.3989422804014327);
  return {mul(g.grad(), add(cdf, mul(x, pdf)))};
}
std::vector<Tensor> sigmoid_grad(const GradContext& g) {
  const Tensor& y = g.output(0);
  return {mul(g.grad(), mul(y, sub(1.0, y)))};
}
std::vector<Tensor> tanh_grad(const GradContext& g) {
  const Tensor& y = g.output(0);
  return {mul(g.grad(), sub(1.0, square(y)))};
}
std::vector<Tensor> softmax_grad(const GradContext& g) {
  const Tensor& y = g.output(0);
  int64_t axis = g.attrs.get_or<int64_t>("axis", -1);
  return {mul(y, sub(g.grad(), reduce_sum(mul(g.grad(), y), {axis}, true)))};
}
std::vector<Tensor> log_softmax_grad(const GradContext& g) {
  int64_t axis = g.attrs.get_or<int64_t>("axis", -1);
  return {sub(g.grad(), mul(exp(g.output(0)), reduce_sum(g.grad(), {axis}, true)))};
}

}  // namespace

void register_nn_gradients() {
  register_gradient("Relu", relu_grad);
  register_gradient("ReluGrad", relu_grad_grad);
  register_gradient("Sigmoid", sigmoid_grad);
  register_gradient("Tanh", tanh_grad);
  register_gradient("Gelu", gelu_grad);
  register_gradient("Softmax", softmax_grad);
  register_gradient("LogSoftmax", log_softmax_grad);
}

}  // namespace weft
