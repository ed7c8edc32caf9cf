// Front-ends of the arithmetic ops. Their gradients will sit beside them here.
#include "api/ops/math.h"

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

}  // namespace weft
