// Front-ends of the pooling ops and their gradients. Each gradient is an op of its own
// (kernels/defs/pooling.cpp), so a backward pass runs one kernel per pooling layer, and the
// gradients' gradients close the chain for any order:
//   MaxPool          -> MaxPoolGrad(x, y, dy)
//   MaxPoolGrad      -> (0 for x, 0 for y, MaxPoolGradGrad(x, y, ddx) for dy): piecewise constant in
//                       x and y (the maxima move only at ties), linear in dy
//   MaxPoolGradGrad  -> (0, 0, MaxPoolGrad(x, y, dddy) for ddx): the transpose of the transpose
//   AvgPool          -> AvgPoolGrad(dy), the input's sizes as an attribute
//   AvgPoolGrad      -> avg_pool2d(ddx): linear, and the transpose of AvgPoolGrad is AvgPool
#include "api/ops/pooling.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/register_gradients.h"

namespace weft {

namespace {

Attrs pool_attrs(std::vector<int64_t> ksize, std::vector<int64_t> strides, const std::string& padding) {
  return {{"ksize", std::move(ksize)}, {"strides", std::move(strides)}, {"padding", padding}};
}

// The forward node's window attributes, passed on unchanged to its gradient ops.
Attrs window_attrs_of(const Attrs& attrs) {
  return {{"ksize", attrs.get<std::vector<int64_t>>("ksize")},
          {"strides", attrs.get<std::vector<int64_t>>("strides")},
          {"padding", attrs.get<std::string>("padding")}};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding, const SourceLocation& loc) {
  static const OpDef& op = op_def("MaxPool");
  return dispatch1(op, {x}, pool_attrs(std::move(ksize), std::move(strides), padding), loc);
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding, const SourceLocation& loc) {
  static const OpDef& op = op_def("AvgPool");
  return dispatch1(op, {x}, pool_attrs(std::move(ksize), std::move(strides), padding), loc);
}

namespace {

Tensor max_pool_grad_op(const Tensor& x, const Tensor& y, const Tensor& dy, const Attrs& attrs) {
  static const OpDef& op = op_def("MaxPoolGrad");
  return dispatch1(op, {x, y, dy}, window_attrs_of(attrs));
}

Tensor max_pool_grad_grad_op(const Tensor& x, const Tensor& y, const Tensor& ddx, const Attrs& attrs) {
  static const OpDef& op = op_def("MaxPoolGradGrad");
  return dispatch1(op, {x, y, ddx}, window_attrs_of(attrs));
}

std::vector<Tensor> max_pool_grad(const GradContext& g) {
  return {max_pool_grad_op(g.input(0), g.output(0), g.grad(), g.attrs)};
}

std::vector<Tensor> max_pool_grad_grad(const GradContext& g) {
  Tensor ddy;
  if (g.needs(2)) ddy = max_pool_grad_grad_op(g.input(0), g.input(1), g.grad(), g.attrs);
  return {zeros_like(g.input(0)), zeros_like(g.input(1)), ddy};
}

std::vector<Tensor> max_pool_grad_grad_grad(const GradContext& g) {
  Tensor dddx;
  if (g.needs(2)) dddx = max_pool_grad_op(g.input(0), g.input(1), g.grad(), g.attrs);
  return {zeros_like(g.input(0)), zeros_like(g.input(1)), dddx};
}

// The input's sizes become an attribute. Where some are unknown (a trace with unknown dims), x
// goes along as a second input whose shape supplies them when the gradient runs; otherwise it is
// left out, so the backward pass does not keep the forward input alive.
std::vector<Tensor> avg_pool_grad(const GradContext& g) {
  static const OpDef& op = op_def("AvgPoolGrad");
  Attrs attrs = window_attrs_of(g.attrs);
  const Shape& in = g.input(0).shape();
  attrs.set("input_sizes", in.to_vector());
  if (in.is_fully_defined()) return {dispatch1(op, {g.grad()}, attrs)};
  return {dispatch1(op, {g.grad(), g.input(0)}, attrs)};
}

// Linear in dy; the optional x only lends its shape.
std::vector<Tensor> avg_pool_grad_grad(const GradContext& g) {
  const Attrs& a = g.attrs;
  std::vector<Tensor> d = {avg_pool2d(g.grad(), a.get<std::vector<int64_t>>("ksize"),
                                      a.get<std::vector<int64_t>>("strides"), a.get<std::string>("padding"))};
  if (g.inputs.size() == 2) d.push_back(Tensor());
  return d;
}

}  // namespace

void register_pooling_gradients() {
  register_gradient("MaxPool", max_pool_grad);
  register_gradient("MaxPoolGrad", max_pool_grad_grad);
  register_gradient("MaxPoolGradGrad", max_pool_grad_grad_grad);
  register_gradient("AvgPool", avg_pool_grad);
  register_gradient("AvgPoolGrad", avg_pool_grad_grad);
}

}  // namespace weft
