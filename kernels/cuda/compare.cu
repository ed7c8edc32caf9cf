// CUDA kernels of the comparisons (bool outputs) and Select, with NumPy broadcasting and the CPU
// kernels' dtypes (kernels/cpu/math.cpp), plus float16 and bfloat16 (compared as floats; Select
// moves their bits). The scalar functions are in elementwise_ops.cuh.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/cuda/elementwise_ops.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class Op, class T>
void compare_kernel(KernelContext& ctx) {
  launch_elementwise(ctx, Op{}, static_cast<bool*>(raw_data(ctx.output(0))),
                     static_cast<const T*>(raw_data(ctx.input(0))), static_cast<const T*>(raw_data(ctx.input(1))));
}

template <class T>
void select_kernel(KernelContext& ctx) {
  launch_elementwise(ctx, SelectOp{}, static_cast<T*>(raw_data(ctx.output(0))),
                     static_cast<const bool*>(raw_data(ctx.input(0))), static_cast<const T*>(raw_data(ctx.input(1))),
                     static_cast<const T*>(raw_data(ctx.input(2))));
}

template <class Op>
void register_numeric(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, compare_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, compare_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, int32, compare_kernel<Op, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, compare_kernel<Op, int64_t>);
  register_kernel(op, DeviceType::CUDA, float16, compare_kernel<ViaFloat<Op>, Half>);
  register_kernel(op, DeviceType::CUDA, bfloat16, compare_kernel<ViaFloat<Op>, BFloat16>);
}

}  // namespace

void register_compare_kernels() {
  register_numeric<EqualOp>("Equal");
  register_numeric<NotEqualOp>("NotEqual");
  register_kernel("Equal", DeviceType::CUDA, bool_, compare_kernel<EqualOp, bool>);
  register_kernel("NotEqual", DeviceType::CUDA, bool_, compare_kernel<NotEqualOp, bool>);
  register_numeric<LessOp>("Less");
  register_numeric<LessEqualOp>("LessEqual");
  register_numeric<GreaterOp>("Greater");
  register_numeric<GreaterEqualOp>("GreaterEqual");

  register_kernel("Select", DeviceType::CUDA, float32, select_kernel<float>);
  register_kernel("Select", DeviceType::CUDA, float64, select_kernel<double>);
  register_kernel("Select", DeviceType::CUDA, int32, select_kernel<int32_t>);
  register_kernel("Select", DeviceType::CUDA, int64, select_kernel<int64_t>);
  register_kernel("Select", DeviceType::CUDA, bool_, select_kernel<bool>);
  register_kernel("Select", DeviceType::CUDA, float16, select_kernel<Half>);
  register_kernel("Select", DeviceType::CUDA, bfloat16, select_kernel<BFloat16>);
}

}  // namespace weft::cuda
