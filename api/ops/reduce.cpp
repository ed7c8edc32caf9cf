// Front-ends of the reductions and, below them, their gradients.
#include "api/ops/reduce.h"

#include <algorithm>

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/math.h"
#include "api/ops/register_gradients.h"

namespace weft {

namespace {

Tensor reduce(const OpDef& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
              const SourceLocation& loc) {
  return dispatch1(op, {x}, {{"axes", axes}, {"keepdims", keepdims}}, loc);
}

}  // namespace

Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Sum");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Mean");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Max");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Min");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor argmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("ArgMax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

}  // namespace weft

namespace weft {

namespace {

// The input's shape with every reduced dim set to 1: the gradient of the (keepdims=false)
// output is reshaped to it and then broadcast back over the reduced dims.
Shape kept_shape(const GradContext& g) {
  const Shape& in = g.input(0).shape();
  std::vector<int64_t> axes = g.attrs.get<std::vector<int64_t>>("axes");
  Shape kept = in;
  if (axes.empty()) {
    for (int64_t i = 0; i < kept.rank(); ++i) kept[i] = 1;
  } else {
    for (int64_t a : axes) kept[a < 0 ? a + in.rank() : a] = 1;
  }
  return kept;
}

Tensor spread(const GradContext& g, const Tensor& t) {
  const Tensor& x = g.input(0);
  if (x.shape().is_fully_defined()) return broadcast_to(reshape(t, kept_shape(g)), x.shape());
  if (t.rank() == x.rank()) return broadcast_like(t, x);  // kept dims (keepdims, or all reduced)
  // Unknown dims (a graph traced with relaxed shapes): put the reduced axes back one by one.
  std::vector<int64_t> axes = g.attrs.get<std::vector<int64_t>>("axes");
  Tensor kept = t;
  if (axes.empty()) {
    kept = reshape(t, kept_shape(g));
  } else {
    for (int64_t& a : axes) a = a < 0 ? a + x.rank() : a;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) kept = expand_dims(kept, a);
  }
  return broadcast_like(kept, x);
}

std::vector<Tensor> sum_grad(const GradContext& g) { return {spread(g, g.grad())}; }

std::vector<Tensor> mean_grad(const GradContext& g) {
  if (!g.input(0).shape().is_fully_defined()) {
    const DType d = g.grad().dtype();
    return {spread(g, div(g.grad(), div(size_of(g.input(0), d), size_of(g.output(0), d))))};
  }
  double count = static_cast<double>(g.input(0).size()) / static_cast<double>(std::max<int64_t>(g.output(0).size(), 1));
  return {spread(g, mul(g.grad(), 1.0 / std::max(count, 1.0)))};
}

// The gradient goes to the elements equal to the extreme, shared equally between ties (as in
// TensorFlow), so that the gradient of max over [1, 3, 3] is [0, 0.5, 0.5].
std::vector<Tensor> extreme_grad(const GradContext& g) {
  Tensor hit = cast(equal(g.input(0), spread(g, g.output(0))), g.input(0).dtype());
  Tensor ties = spread(g, reduce_sum(hit, g.attrs.get<std::vector<int64_t>>("axes"), false));
  return {div(mul(hit, spread(g, g.grad())), ties)};
}

}  // namespace

void register_reduce_gradients() {
  register_gradient("Sum", sum_grad);
  register_gradient("Mean", mean_grad);
  register_gradient("Max", extreme_grad);
  register_gradient("Min", extreme_grad);
}

}  // namespace weft
