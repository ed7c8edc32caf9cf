// CUDA kernels of the unary elementwise ops, with the CPU kernels' semantics (kernels/cpu/math.cpp,
// kernels/cpu/nn.cpp) and dtypes.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_launch.cuh"

namespace weft::cuda {

namespace {

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

template <class Op, class T>
void unary_kernel(KernelContext& ctx) {
  launch_unary(ctx, Op{}, static_cast<T*>(ctx.output(0).raw_data()), static_cast<const T*>(ctx.input(0).raw_data()));
}

template <class Op>
void register_numeric(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, unary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, unary_kernel<Op, double>);
  register_kernel(op, DeviceType::CUDA, int32, unary_kernel<Op, int32_t>);
  register_kernel(op, DeviceType::CUDA, int64, unary_kernel<Op, int64_t>);
}
template <class Op>
void register_float(const char* op) {
  register_kernel(op, DeviceType::CUDA, float32, unary_kernel<Op, float>);
  register_kernel(op, DeviceType::CUDA, float64, unary_kernel<Op, double>);
}

}  // namespace

void register_unary_kernels() {
  register_numeric<NegOp>("Neg");
  register_numeric<AbsOp>("Abs");
  register_numeric<SignOp>("Sign");
  register_numeric<SquareOp>("Square");
  register_float<ExpOp>("Exp");
  register_float<LogOp>("Log");
  register_float<SqrtOp>("Sqrt");
  register_float<RsqrtOp>("Rsqrt");
  register_numeric<ReluOp>("Relu");
  register_float<SigmoidOp>("Sigmoid");
  register_float<TanhOp>("Tanh");
}

}  // namespace weft::cuda
