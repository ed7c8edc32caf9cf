// CUDA kernels of the binary arithmetic ops, with NumPy broadcasting and the CPU kernels'
// semantics (kernels/cpu/math.cpp): integers wrap around, integer division floors and refuses a
// zero divisor, integer powers refuse negative exponents, Maximum/Minimum propagate NaN.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_launch.cuh"

namespace weft::cuda {

namespace {

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
struct FloatDivOp {
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

template <class T>
const T* in_ptr(const KernelContext& ctx, int i) { return static_cast<const T*>(ctx.input(i).raw_data()); }
template <class T>
T* out_ptr(const KernelContext& ctx) { return static_cast<T*>(ctx.output(0).raw_data()); }

template <class Op, class T>
void binary_kernel(KernelContext& ctx) {
  launch_elementwise(ctx, Op{}, out_ptr<T>(ctx), in_ptr<T>(ctx, 0), in_ptr<T>(ctx, 1));
}

std::string error_message(int32_t code) {
  if (code == kErrorDivisionByZero) return "integer division by zero";
  if (code == kErrorNegativePower) return "integers to negative integer powers are not allowed";
  return "the CUDA kernel reported error code " + std::to_string(code);
}

// Integer Div and Pow: the kernel reports bad data through the context's error word, read back
// before returning (a synchronisation, the price of failing like the CPU kernel).
template <class Op, class T>
void checked_binary_kernel(KernelContext& ctx) {
  launch_checked(
      ctx, [&](int32_t* word) { launch_elementwise(ctx, Op{word}, out_ptr<T>(ctx), in_ptr<T>(ctx, 0), in_ptr<T>(ctx, 1)); },
      error_message);
}

template <class Op>
void register_numeric(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, binary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, binary_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, int32, binary_kernel<Op, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, binary_kernel<Op, int64_t>);
}

template <class FloatOp, class IntOp>
void register_split(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, binary_kernel<FloatOp, float>);
  register_kernel(op, DeviceType::CUDA, float64, binary_kernel<FloatOp, double>);
  register_kernel(op, DeviceType::CUDA, int32, checked_binary_kernel<IntOp, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, checked_binary_kernel<IntOp, int64_t>);
}

}  // namespace

void register_binary_kernels() {
  register_numeric<AddOp>("Add");
  register_numeric<SubOp>("Sub");
  register_numeric<MulOp>("Mul");
  register_split<FloatDivOp, IntDivOp>("Div");
  register_numeric<MaximumOp>("Maximum");
  register_numeric<MinimumOp>("Minimum");
  register_split<FloatPowOp, IntPowOp>("Pow");
  register_kernel("ReluGrad", DeviceType::CUDA, float32, binary_kernel<ReluGradOp, float>);
  register_kernel("ReluGrad", DeviceType::CUDA, float64, binary_kernel<ReluGradOp, double>);
}

}  // namespace weft::cuda
