// CUDA kernels of the unary elementwise ops, with the CPU kernels' semantics (kernels/cpu/math.cpp,
// kernels/cpu/nn.cpp) and dtypes, plus float16 and bfloat16 computed in float and rounded once.
// The scalar functions are in elementwise_ops.cuh (shared with FusedElementwise), but Sin and Cos
// (kernels/cpu/trig.cpp), which no fused program uses: CUDA's sinf/cosf and sin/cos are within 2
// ulps of the exact result by the CUDA programming guide, where glibc's are within one, so the two
// devices may differ in the last bit.
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/cuda/elementwise_ops.cuh"
#include "runtime/tensor_internals.h"

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
  launch_unary(ctx, Op{}, static_cast<T*>(raw_data(ctx.output(0))), static_cast<const T*>(raw_data(ctx.input(0))));
}

template <class Op>
void register_float(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, unary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, unary_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, float16, unary_kernel<ViaFloat<Op>, Half>);
  register_kernel(op, DeviceType::CUDA, bfloat16, unary_kernel<ViaFloat<Op>, BFloat16>);
}
template <class Op>
void register_numeric(const char* op) {
  register_float<Op>(op);
  register_kernel(op, DeviceType::CUDA, int32, unary_kernel<Op, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, unary_kernel<Op, int64_t>);
}

}  // namespace

void register_unary_kernels() {
  register_numeric<NegOp>("Neg");
  register_numeric<AbsOp>("Abs");
  register_numeric<SignOp>("Sign");
  register_numeric<SquareOp>("Square");
  register_float<ExpOp>("Exp");
  register_float<LogOp>("Log");
  register_float<ErfOp>("Erf");
  register_float<GeluOp>("Gelu");
  register_float<SqrtOp>("Sqrt");
  register_float<RsqrtOp>("Rsqrt");
  register_numeric<ReluOp>("Relu");
  register_float<SigmoidOp>("Sigmoid");
  register_float<TanhOp>("Tanh");
  register_float<SinOp>("Sin");
  register_float<CosOp>("Cos");
}

}  // namespace weft::cuda
