// Arithmetic, comparison and selection: free functions over tensors, broadcasting like NumPy.
//
//   Tensor y = weft::relu(a + b);        // operators take tensors or plain numbers on either side
//   Tensor m = weft::maximum(x, 0.f);
//   Tensor c = weft::where(x > 0, x, -x);
#pragma once

#include <type_traits>

#include "api/source_location.h"
#include "runtime/tensor.h"
#include "api/ops/scalar.h"

namespace weft {

#define WEFT_BINARY_OP(fn)                                                                         \
  Tensor fn(const Tensor& a, const Tensor& b, const SourceLocation& loc = SourceLocation::current()); \
  template <Scalar S>                                                                              \
  Tensor fn(const Tensor& a, S b, const SourceLocation& loc = SourceLocation::current()) {       \
    return fn(a, scalar_like(a, b, #fn), loc);                                                   \
  }                                                                                                \
  template <Scalar S>                                                                              \
  Tensor fn(S a, const Tensor& b, const SourceLocation& loc = SourceLocation::current()) {       \
    return fn(scalar_like(b, a, #fn), b, loc);                                                   \
  }
WEFT_BINARY_OP(add)
WEFT_BINARY_OP(sub)
WEFT_BINARY_OP(mul)
WEFT_BINARY_OP(div)
WEFT_BINARY_OP(pow)
WEFT_BINARY_OP(maximum)
WEFT_BINARY_OP(minimum)
WEFT_BINARY_OP(equal)
WEFT_BINARY_OP(not_equal)
WEFT_BINARY_OP(less)
WEFT_BINARY_OP(less_equal)
WEFT_BINARY_OP(greater)
WEFT_BINARY_OP(greater_equal)
#undef WEFT_BINARY_OP

#define WEFT_UNARY_OP(fn) Tensor fn(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
WEFT_UNARY_OP(neg)
WEFT_UNARY_OP(abs)
WEFT_UNARY_OP(sign)
WEFT_UNARY_OP(exp)
WEFT_UNARY_OP(log)
WEFT_UNARY_OP(erf)  // the error function, 2/sqrt(pi) times the integral of e^{-t^2} from 0 to x
WEFT_UNARY_OP(sqrt)
WEFT_UNARY_OP(rsqrt)
WEFT_UNARY_OP(square)
#undef WEFT_UNARY_OP

// Elementwise choice: cond ? a : b, all three broadcast together; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b,
             const SourceLocation& loc = SourceLocation::current());
Tensor cast(const Tensor& x, DType dtype, const SourceLocation& loc = SourceLocation::current());

// An operand that remembers where the expression using it was written. Operators cannot take a
// source-location parameter, but the default argument of a converting constructor is evaluated
// at the call site, so graph nodes made by `a + b` still point at the user's line.
struct LocatedTensor {
  template <class T>
    requires std::is_convertible_v<const T&, Tensor>
  LocatedTensor(const T& t, SourceLocation where = SourceLocation::current())  // NOLINT: implicit by design
      : tensor(t), loc(where) {}
  Tensor tensor;
  SourceLocation loc;
};

#define WEFT_BINARY_OPERATOR(sym, fn)                                                                        \
  inline Tensor operator sym(const LocatedTensor& a, const Tensor& b) { return fn(a.tensor, b, a.loc); }     \
  template <Scalar S>                                                                                        \
  Tensor operator sym(const LocatedTensor& a, S b) {                                                         \
    return fn(a.tensor, scalar_like(a.tensor, b, #fn), a.loc);                                               \
  }                                                                                                          \
  template <Scalar S>                                                                                        \
  Tensor operator sym(S a, const LocatedTensor& b) {                                                         \
    return fn(scalar_like(b.tensor, a, #fn), b.tensor, b.loc);                                               \
  }
WEFT_BINARY_OPERATOR(+, add)
WEFT_BINARY_OPERATOR(-, sub)
WEFT_BINARY_OPERATOR(*, mul)
WEFT_BINARY_OPERATOR(/, div)
WEFT_BINARY_OPERATOR(<, less)
WEFT_BINARY_OPERATOR(<=, less_equal)
WEFT_BINARY_OPERATOR(>, greater)
WEFT_BINARY_OPERATOR(>=, greater_equal)
#undef WEFT_BINARY_OPERATOR
inline Tensor operator-(const LocatedTensor& x) { return neg(x.tensor, x.loc); }

}  // namespace weft
