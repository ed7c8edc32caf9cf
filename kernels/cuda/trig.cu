// CUDA kernels of Sin and Cos (kernels/cpu/trig.cpp), with its dtypes: float32 and float64 through
// CUDA's sinf/cosf and sin/cos (within 2 ulps of the exact result by the CUDA programming guide,
// where glibc's are within one: the two devices may differ in the last bit), float16 and bfloat16
// computed in float and rounded once.
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/cuda/elementwise_ops.cuh"

namespace weft::cuda {

namespace {

struct SinOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return sinf(x);
    else return sin(x);
  }
};
struct CosOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return cosf(x);
    else return cos(x);
  }
};

template <class Op, class T>
void unary_kernel(KernelContext& ctx) {
  launch_unary(ctx, Op{}, static_cast<T*>(ctx.output(0).raw_data()), static_cast<const T*>(ctx.input(0).raw_data()));
}

template <class Op>
void register_float(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, unary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, unary_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, float16, unary_kernel<ViaFloat<Op>, Half>);
  register_kernel(op, DeviceType::CUDA, bfloat16, unary_kernel<ViaFloat<Op>, BFloat16>);
}

}  // namespace

void register_trig_kernels() {
  register_float<SinOp>("Sin");
  register_float<CosOp>("Cos");
}

}  // namespace weft::cuda
