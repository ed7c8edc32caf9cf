// The scalar functions of the CUDA elementwise ops, shared by their families (unary.cu,
// binary.cu, compare.cu) and by FusedElementwise (fused.cu), so a fused program computes exactly
// what the separate CUDA ops compute. Each has the semantics of the CPU's functor of the same name
// (kernels/cpu/elementwise_ops.h): integers wrap around, NaN propagates through Maximum/Minimum
// and Relu. FusedElementwise runs opcode k<Op> through <Op>Op (kernels/defs/fused.h).
//
// float16 and bfloat16 go through ViaFloat: the operands are widened to float, the functor runs in
// float, and the result is rounded once to the 16-bit type (comparisons return their bool).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/device_math.cuh"

namespace weft::cuda {

// ---- unary ----

struct NegOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(Wide<T>(0) - static_cast<Wide<T>>(x));
    else return -x;
  }
};
struct AbsOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x < 0 ? static_cast<T>(Wide<T>(0) - static_cast<Wide<T>>(x)) : x;
    else return dev_fabs(x);
  }
};
struct SignOp {  // NaN stays NaN
  template <class T>
  __device__ T operator()(T x) const { return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0))); }
};
struct SquareOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Wide<T>>(x) * static_cast<Wide<T>>(x));
    else return x * x;
  }
};
struct ExpOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_exp(x); }
};
struct LogOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_log(x); }
};
struct ErfOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_erf(x); }
};
struct SqrtOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_sqrt(x); }
};
struct RsqrtOp {  // 1 / sqrt(x), both correctly rounded, as on the CPU (not rsqrtf's approximation)
  template <class T>
  __device__ T operator()(T x) const { return T(1) / dev_sqrt(x); }
};
struct ReluOp {  // NaN passes through
  template <class T>
  __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};
struct SigmoidOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_sigmoid(x); }
};
struct TanhOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_tanh(x); }
};

// ---- binary arithmetic ----

struct AddOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); }
};
struct SubOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b)); }
};
struct MulOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b)); }
};
struct DivOp {  // floats; integers divide through IntDivOp, which can report an error
  template <class T>
  __device__ T operator()(T a, T b) const { return a / b; }  // IEEE division (-prec-div=true)
};
// Floors like Python's //; a zero divisor reports kErrorDivisionByZero.
struct IntDivOp {
  int32_t* error;
  template <class T>
  __device__ T operator()(T a, T b) const {
    if (b == 0) {
      report_error(error, kErrorDivisionByZero);
      return T(0);
    }
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));  // INT_MIN / -1 wraps
      T q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    } else {
      return a / b;
    }
  }
};
struct MaximumOp {  // NaN propagates
  template <class T>
  __device__ T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct MinimumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};
struct FloatPowOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return dev_pow(a, b); }
};
// Square-and-multiply in the unsigned type (wraps like NumPy); a negative exponent reports
// kErrorNegativePower.
struct IntPowOp {
  int32_t* error;
  template <class T>
  __device__ T operator()(T base, T exp) const {
    if (exp < 0) {
      report_error(error, kErrorNegativePower);
      return T(0);
    }
    using U = std::make_unsigned_t<T>;
    U r = 1, b = static_cast<U>(base);
    for (T e = exp; e > 0; e >>= 1) {
      if (e & 1) r *= b;
      b *= b;
    }
    return static_cast<T>(r);
  }
};
struct ReluGradOp {  // (dy, x) -> dy where x > 0
  template <class T>
  __device__ T operator()(T dy, T x) const { return x > T(0) ? dy : T(0); }
};

// ---- comparisons (bool results) and Select ----

struct EqualOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a == b; }
};
struct NotEqualOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a != b; }
};
struct LessOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a < b; }
};
struct LessEqualOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEqualOp {
  template <class T>
  __device__ bool operator()(T a, T b) const { return a >= b; }
};
struct SelectOp {  // moves values without arithmetic: every dtype, the 16-bit ones as they are
  template <class T>
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

// ---- 16-bit floats ----

// Op on float16 / bfloat16 operands: computed in float, rounded once (a bool stays a bool).
template <class Op>
struct ViaFloat {
  Op op;
  template <class T, class... U>
  __device__ auto operator()(T a, U... rest) const {
    static_assert(kIs16BitFloat<T>);
    const auto r = op(to_compute(a), to_compute(rest)...);
    if constexpr (std::is_same_v<std::remove_const_t<decltype(r)>, bool>) return r;
    else return from_compute<T>(r);
  }
};

}  // namespace weft::cuda
