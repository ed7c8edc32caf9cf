// CUDA kernels of the binary arithmetic ops, with NumPy broadcasting and the CPU kernels'
// semantics (kernels/cpu/math.cpp): integers wrap around, integer division floors and refuses a
// zero divisor, integer powers refuse negative exponents, Maximum/Minimum propagate NaN. float16
// and bfloat16 are computed in float and rounded once. The scalar functions are in
// elementwise_ops.cuh (shared with FusedElementwise).
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/cuda/elementwise_ops.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
const T* in_ptr(const KernelContext& ctx, int i) { return static_cast<const T*>(raw_data(ctx.input(i))); }
template <class T>
T* out_ptr(const KernelContext& ctx) { return static_cast<T*>(raw_data(ctx.output(0))); }

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
void register_float(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, binary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, binary_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, float16, binary_kernel<ViaFloat<Op>, Half>);
  register_kernel(op, DeviceType::CUDA, bfloat16, binary_kernel<ViaFloat<Op>, BFloat16>);
}
template <class Op>
void register_numeric(const char* op) {
  register_float<Op>(op);
  register_kernel(op, DeviceType::CUDA, int32, binary_kernel<Op, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, binary_kernel<Op, int64_t>);
}

template <class FloatOp, class IntOp>
void register_split(const char* op) {
  register_float<FloatOp>(op);
  register_kernel(op, DeviceType::CUDA, int32, checked_binary_kernel<IntOp, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, checked_binary_kernel<IntOp, int64_t>);
}

}  // namespace

void register_binary_kernels() {
  register_numeric<AddOp>("Add");
  register_numeric<SubOp>("Sub");
  register_numeric<MulOp>("Mul");
  register_split<DivOp, IntDivOp>("Div");
  register_numeric<MaximumOp>("Maximum");
  register_numeric<MinimumOp>("Minimum");
  register_split<FloatPowOp, IntPowOp>("Pow");
  register_float<ReluGradOp>("ReluGrad");
}

}  // namespace weft::cuda
