// Front-ends of the arithmetic ops and, below them, their gradients.
#include "api/ops/math.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/register_gradients.h"

namespace weft {

#define WEFT_BINARY_FRONTEND(fn, Op)                                                  \
  Tensor fn(const Tensor& a, const Tensor& b, const SourceLocation& loc) {        \
    static const OpDef& op = op_def(Op);                                            \
    return dispatch1(op, {a, b}, {}, loc);                                        \
  }
WEFT_BINARY_FRONTEND(add, "Add")
WEFT_BINARY_FRONTEND(sub, "Sub")
WEFT_BINARY_FRONTEND(mul, "Mul")
WEFT_BINARY_FRONTEND(div, "Div")
WEFT_BINARY_FRONTEND(pow, "Pow")
WEFT_BINARY_FRONTEND(maximum, "Maximum")
WEFT_BINARY_FRONTEND(minimum, "Minimum")
WEFT_BINARY_FRONTEND(equal, "Equal")
WEFT_BINARY_FRONTEND(not_equal, "NotEqual")
WEFT_BINARY_FRONTEND(less, "Less")
WEFT_BINARY_FRONTEND(less_equal, "LessEqual")
WEFT_BINARY_FRONTEND(greater, "Greater")
WEFT_BINARY_FRONTEND(greater_equal, "GreaterEqual")
#undef WEFT_BINARY_FRONTEND

#define WEFT_UNARY_FRONTEND(fn, Op)                                \
  Tensor fn(const Tensor& x, const SourceLocation& loc) {       \
    static const OpDef& op = op_def(Op);                          \
    return dispatch1(op, {x}, {}, loc);                         \
  }
WEFT_UNARY_FRONTEND(neg, "Neg")
WEFT_UNARY_FRONTEND(abs, "Abs")
WEFT_UNARY_FRONTEND(sign, "Sign")
WEFT_UNARY_FRONTEND(exp, "Exp")
WEFT_UNARY_FRONTEND(log, "Log")
WEFT_UNARY_FRONTEND(erf, "Erf")
WEFT_UNARY_FRONTEND(sqrt, "Sqrt")
WEFT_UNARY_FRONTEND(rsqrt, "Rsqrt")
WEFT_UNARY_FRONTEND(square, "Square")
#undef WEFT_UNARY_FRONTEND

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const SourceLocation& loc) {
  static const OpDef& op = op_def("Select");
  return dispatch1(op, {cond, a, b}, {}, loc);
}

Tensor cast(const Tensor& x, DType dtype, const SourceLocation& loc) {
  if (x.defined() && !x.is_symbolic() && x.dtype() == dtype) return x;
  static const OpDef& op = op_def("Cast");
  return dispatch1(op, {x}, {{"dtype", dtype}}, loc);
}

// ---- gradients -------------------------------------------------------------------------------

namespace {

std::vector<Tensor> add_grad(const GradContext& g) {
  return {unbroadcast(g.grad(), g.input(0)), unbroadcast(g.grad(), g.input(1))};
}
std::vector<Tensor> sub_grad(const GradContext& g) {
  return {unbroadcast(g.grad(), g.input(0)), unbroadcast(neg(g.grad()), g.input(1))};
}
std::vector<Tensor> mul_grad(const GradContext& g) {
  return {unbroadcast(mul(g.grad(), g.input(1)), g.input(0)), unbroadcast(mul(g.grad(), g.input(0)), g.input(1))};
}
std::vector<Tensor> div_grad(const GradContext& g) {
  // d(a/b)/db = -a/b^2 = -(a/b)/b; computed from the inputs (not the output) so that the
  // gradient itself stays differentiable with respect to both of them.
  const Tensor& a = g.input(0);
  const Tensor& b = g.input(1);
  return {unbroadcast(div(g.grad(), b), a), unbroadcast(neg(div(mul(g.grad(), div(a, b)), b)), b)};
}
std::vector<Tensor> pow_grad(const GradContext& g) {
  const Tensor& a = g.input(0);
  const Tensor& b = g.input(1);
  Tensor ga = mul(g.grad(), mul(b, pow(a, sub(b, 1))));
  // log(a) is only real for a > 0; the exponent gets no gradient elsewhere (as in TensorFlow).
  Tensor positive = greater(a, zeros_like(a));
  Tensor safe_a = where(positive, a, ones_like(a));
  Tensor gb = mul(g.grad(), where(positive, mul(pow(a, b), log(safe_a)), zeros_like(a)));
  return {unbroadcast(ga, a), unbroadcast(gb, b)};
}
std::vector<Tensor> select_between(const GradContext& g, const Tensor& pick_first) {
  Tensor zero = zeros_like(g.grad());
  return {unbroadcast(where(pick_first, g.grad(), zero), g.input(0)),
          unbroadcast(where(pick_first, zero, g.grad()), g.input(1))};
}
std::vector<Tensor> maximum_grad(const GradContext& g) {
  return select_between(g, greater_equal(g.input(0), g.input(1)));
}
std::vector<Tensor> minimum_grad(const GradContext& g) { return select_between(g, less_equal(g.input(0), g.input(1))); }

std::vector<Tensor> neg_grad(const GradContext& g) { return {neg(g.grad())}; }
std::vector<Tensor> abs_grad(const GradContext& g) { return {mul(g.grad(), sign(g.input(0)))}; }
std::vector<Tensor> sign_grad(const GradContext& g) { return {zeros_like(g.input(0))}; }
std::vector<Tensor> square_grad(const GradContext& g) { return {mul(g.grad(), mul(g.input(0), 2))}; }
std::vector<Tensor> exp_grad(const GradContext& g) { return {mul(g.grad(), exp(g.input(0)))}; }
std::vector<Tensor> log_grad(const GradContext& g) { return {div(g.grad(), g.input(0))}; }
// d/dx erf(x) = 2/sqrt(pi) e^{-x^2}
std::vector<Tensor> erf_grad(const GradContext& g) {
  const Tensor& x = g.input(0);
  return {mul(g.grad(), mul(exp(neg(square(x))), 1.1283791670955126))};
}
std::vector<Tensor> sqrt_grad(const GradContext& g) { return {div(mul(g.grad(), 0.5), sqrt(g.input(0)))}; }
std::vector<Tensor> rsqrt_grad(const GradContext& g) {
  // d/dx x^-1/2 = -1/2 x^-3/2
  Tensor r = rsqrt(g.input(0));
  return {mul(g.grad(), mul(div(r, g.input(0)), -0.5))};
}
std::vector<Tensor> select_grad(const GradContext& g) {
  Tensor zero = zeros_like(g.grad());
  return {Tensor(), unbroadcast(where(g.input(0), g.grad(), zero), g.input(1)),
          unbroadcast(where(g.input(0), zero, g.grad()), g.input(2))};
}
std::vector<Tensor> cast_grad(const GradContext& g) {
  if (!is_floating(g.input(0).dtype()) || !is_floating(g.output(0).dtype())) return {Tensor()};
  return {cast(g.grad(), g.input(0).dtype())};
}

}  // namespace

void register_math_gradients() {
  register_gradient("Add", add_grad);
  register_gradient("Sub", sub_grad);
  register_gradient("Mul", mul_grad);
  register_gradient("Div", div_grad);
  register_gradient("Pow", pow_grad);
  register_gradient("Maximum", maximum_grad);
  register_gradient("Minimum", minimum_grad);
  register_gradient("Neg", neg_grad);
  register_gradient("Abs", abs_grad);
  register_gradient("Sign", sign_grad);
  register_gradient("Square", square_grad);
  register_gradient("Exp", exp_grad);
  register_gradient("Log", log_grad);
  register_gradient("Erf", erf_grad);
  register_gradient("Sqrt", sqrt_grad);
  register_gradient("Rsqrt", rsqrt_grad);
  register_gradient("Select", select_grad);
  register_gradient("Cast", cast_grad);
}

}  // namespace weft
