// The scalar functions of the CUDA elementwise ops, shared by their families (unary.cu,
// binary.cu, compare.cu) and by FusedElementwise (fused.cu), so a fused program computes exactly
// what the separate CUDA ops compute; FusedElementwise runs opcode k<Op> through <Op>Op
// (kernels/defs/fused.h). The exact ops (Neg, Sign, Square, Relu, Add, Sub, Mul, Maximum, Minimum,
// ReluGrad and the comparisons) are kernels/shared_elementwise_ops.h's, the CPU's functors too.
// Here are the CUDA's own: those calling CUDA's math library, with the semantics of the CPU's
// functor of the same name (kernels/cpu/elementwise_ops.h), and the integer Div and Pow, which
// report bad data through the context's error word.
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

struct AbsOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x < 0 ? NegOp{}(x) : x;
    else return dev_fabs(x);
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
// The exact GELU as its composition (x * 0.5) * (erf(x * sqrt(1/2)) + 1), the CPU's order.
struct GeluOp {
  template <class T>
  __device__ T operator()(T x) const {
    return (x * T(0.5)) * (dev_erf(x * T(0.7071067811865476)) + T(1));
  }
};
struct SqrtOp {
  template <class T>
  __device__ T operator()(T x) const { return dev_sqrt(x); }
};
struct RsqrtOp {  // 1 / sqrt(x), both correctly rounded, as on the CPU (not rsqrtf's approximation)
  template <class T>
  __device__ T operator()(T x) const { return T(1) / dev_sqrt(x); }
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

struct DivOp {  // floats; integers divide through IntDivOp, which can report an error
  template <class T>
  __device__ T operator()(T a, T b) const { return a / b; }  // IEEE division (-prec-div=true)
};
// Floors (floor_div); a zero divisor reports kErrorDivisionByZero.
struct IntDivOp {
  int32_t* error;
  template <class T>
  __device__ T operator()(T a, T b) const {
    if (b == 0) {
      report_error(error, kErrorDivisionByZero);
      return T(0);
    }
    return floor_div(a, b);
  }
};
struct FloatPowOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return dev_pow(a, b); }
};
// Wraps (int_pow); a negative exponent reports kErrorNegativePower.
struct IntPowOp {
  int32_t* error;
  template <class T>
  __device__ T operator()(T base, T exp) const {
    if (exp < 0) {
      report_error(error, kErrorNegativePower);
      return T(0);
    }
    return int_pow(base, exp);
  }
};
// ---- Select ----

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
