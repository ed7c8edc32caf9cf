// The scalar functions of the elementwise ops whose arithmetic is exact and needs nothing of a
// device (no library function, no error to report): one functor per op, compiled for the host and
// for CUDA devices, which the CPU kernels (kernels/cpu/elementwise_ops.h) and the CUDA kernels
// (kernels/cuda/elementwise_ops.cuh) both call, so the two devices cannot drift apart on them. The
// ops that call a math library have a functor per device, in those headers; so do the integer Div
// and Pow, around the arithmetic here (floor_div, int_pow), because each device reports a zero
// divisor or a negative exponent its own way.
//
// Integer arithmetic wraps around on overflow (as in TensorFlow and NumPy) instead of being UB: it
// is done in the unsigned type of the same width. NaN propagates through Maximum, Minimum, Sign
// and Relu.
#pragma once

#include <type_traits>

#include "kernels/host_device.h"

namespace weft {

template <class T, bool = std::is_integral_v<T>>
struct WrapType { using type = T; };
template <class T>
struct WrapType<T, true> { using type = std::make_unsigned_t<T>; };
// The type integer arithmetic is done in: T's unsigned twin, or T itself for floats.
template <class T>
using Wide = typename WrapType<T>::type;

// ---- unary ----

struct NegOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(Wide<T>(0) - static_cast<Wide<T>>(x));
    else return -x;  // not 0 - x, which is +0 for x = +0
  }
};
struct SignOp {  // NaN stays NaN
  template <class T>
  WEFT_HOST_DEVICE T operator()(T x) const { return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0))); }
};
struct SquareOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T x) const {
    return static_cast<T>(static_cast<Wide<T>>(x) * static_cast<Wide<T>>(x));
  }
};
struct ReluOp {  // NaN passes through
  template <class T>
  WEFT_HOST_DEVICE T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

// ---- binary arithmetic ----

struct AddOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  }
};
struct SubOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b));
  }
};
struct MulOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  }
};
struct MaximumOp {  // NaN propagates
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct MinimumOp {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};
struct ReluGradOp {  // (dy, x) -> dy where x > 0: relu's backward pass
  template <class T>
  WEFT_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : T(0); }
};

// ---- integer Div and Pow, once the operands are known to be valid ----

// Floors like Python's // and tf.math.floordiv; b != 0. INT_MIN / -1 wraps instead of trapping.
template <class T>
WEFT_HOST_DEVICE T floor_div(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return NegOp{}(a);
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}

// Square and multiply in the unsigned type, wrapping like NumPy; exp >= 0.
template <class T>
WEFT_HOST_DEVICE T int_pow(T base, T exp) {
  using U = std::make_unsigned_t<T>;
  U r = 1, b = static_cast<U>(base);
  for (T e = exp; e > 0; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return static_cast<T>(r);
}

// ---- comparisons (bool results) ----

struct EqualOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
struct NotEqualOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};
struct LessOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
struct LessEqualOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEqualOp {
  template <class T>
  WEFT_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};

}  // namespace weft
