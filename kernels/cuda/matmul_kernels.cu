// The bias / activation epilogue and the plain GEMM of the CUDA MatMul family (see
// matmul_kernels.h); the floating-point products themselves are cuBLASLt's (matmul.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/cuda/matmul_kernels.h"
#include "runtime/error.h"

namespace weft::cuda {

namespace {

// Storage type -> the type arithmetic is done in.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };

template <class T>
__device__ __forceinline__ typename ComputeOf<T>::type load(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return x;
}
template <class T, class C>
__device__ __forceinline__ T store(C x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return static_cast<T>(x);
}

template <class C>
__device__ __forceinline__ C activate(C x, Activation act) {
  switch (act) {
    case Activation::kRelu: return x < C(0) ? C(0) : x;  // NaN passes through, as on the CPU
    case Activation::kSigmoid: return dev_sigmoid(x);
    case Activation::kTanh: return dev_tanh(x);
    default: return x;
  }
}

template <class T>
__global__ void bias_activation_kernel(T* __restrict__ c, const T* __restrict__ bias, int64_t total, int64_t n,
                                       Activation act) {
  using C = typename ComputeOf<T>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    C x = load(c[i]);
    if (bias) x = x + load(bias[i % n]);
    c[i] = store<T>(activate(x, act));
  }
}

template <class T>
void launch_epilogue(void* c, const void* bias, int64_t total, int64_t n, Activation act, cudaStream_t stream) {
  const LaunchGeometry lg = launch_geometry(total);
  if (lg.blocks == 0) return;
  bias_activation_kernel<T><<<lg.blocks, lg.threads, 0, stream>>>(static_cast<T*>(c), static_cast<const T*>(bias),
                                                                   total, n, act);
}

template <class T>
__global__ void relu_grad_mask_kernel(T* __restrict__ c, const T* __restrict__ x, int64_t total) {
  using C = typename ComputeOf<T>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    if (!(load(x[i]) > C(0))) c[i] = store<T>(C(0));  // kept where x > 0, as ReluGradOp selects
}

template <class T>
void launch_mask(void* c, const void* x, int64_t total, cudaStream_t stream) {
  const LaunchGeometry lg = launch_geometry(total);
  if (lg.blocks == 0) return;
  relu_grad_mask_kernel<T><<<lg.blocks, lg.threads, 0, stream>>>(static_cast<T*>(c), static_cast<const T*>(x), total);
}

// One thread per element of C. Integers accumulate in the unsigned type (wrapping as the CPU does);
// floats in float (16-bit types) or their own type.
template <class T> struct AccumulatorOf { using type = typename ComputeOf<T>::type; };
template <> struct AccumulatorOf<int32_t> { using type = uint32_t; };
template <> struct AccumulatorOf<int64_t> { using type = uint64_t; };

template <class T>
__global__ void plain_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t count,
                                  int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda, int64_t ldb,
                                  int64_t a_stride, int64_t b_stride, int64_t c_stride) {
  using Acc = typename AccumulatorOf<T>::type;
  const int64_t total = count * m * n;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t batch = i / (m * n);
    const int64_t r = (i / n) % m;
    const int64_t j = i % n;
    const T* pa = a + batch * a_stride;
    const T* pb = b + batch * b_stride;
    Acc acc = 0;
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(load(ta ? pa[p * lda + r] : pa[r * lda + p]));
      const Acc bv = static_cast<Acc>(load(tb ? pb[j * ldb + p] : pb[p * ldb + j]));
      acc += av * bv;
    }
    c[batch * c_stride + r * n + j] = store<T>(acc);
  }
}

template <class T>
void launch_plain(const GemmGeometry& g, const GemmRun& run, const void* a, const void* b, void* c,
                  cudaStream_t stream) {
  const LaunchGeometry lg = launch_geometry(run.count * g.m * g.n);
  if (lg.blocks == 0) return;
  plain_gemm_kernel<T><<<lg.blocks, lg.threads, 0, stream>>>(
      static_cast<const T*>(a) + run.a_offset, static_cast<const T*>(b) + run.b_offset,
      static_cast<T*>(c) + run.c_offset, run.count, g.m, g.n, g.k, g.ta, g.tb, g.lda, g.ldb, run.a_stride,
      run.b_stride, run.c_stride);
}

}  // namespace

void launch_bias_activation(DType dtype, void* c, const void* bias, int64_t rows, int64_t n, Activation act,
                            cudaStream_t stream) {
  const int64_t total = rows * n;
  switch (dtype) {
    case DType::Float32: return launch_epilogue<float>(c, bias, total, n, act, stream);
    case DType::Float64: return launch_epilogue<double>(c, bias, total, n, act, stream);
    case DType::Float16: return launch_epilogue<__half>(c, bias, total, n, act, stream);
    case DType::BFloat16: return launch_epilogue<__nv_bfloat16>(c, bias, total, n, act, stream);
    default: throw Internal("[matmul] no CUDA epilogue for " + std::string(dtype_name(dtype)));
  }
}

void launch_relu_grad_mask(DType dtype, void* c, const void* x, int64_t total, cudaStream_t stream) {
  switch (dtype) {
    case DType::Float32: return launch_mask<float>(c, x, total, stream);
    case DType::Float64: return launch_mask<double>(c, x, total, stream);
    case DType::Float16: return launch_mask<__half>(c, x, total, stream);
    case DType::BFloat16: return launch_mask<__nv_bfloat16>(c, x, total, stream);
    default: throw Internal("[matmul] no CUDA relu_grad epilogue for " + std::string(dtype_name(dtype)));
  }
}

void launch_plain_gemm(DType dtype, const GemmGeometry& g, const GemmRun& run, const void* a, const void* b, void* c,
                       cudaStream_t stream) {
  switch (dtype) {
    case DType::Float32: return launch_plain<float>(g, run, a, b, c, stream);
    case DType::Float64: return launch_plain<double>(g, run, a, b, c, stream);
    case DType::Float16: return launch_plain<__half>(g, run, a, b, c, stream);
    case DType::BFloat16: return launch_plain<__nv_bfloat16>(g, run, a, b, c, stream);
    case DType::Int32: return launch_plain<int32_t>(g, run, a, b, c, stream);
    case DType::Int64: return launch_plain<int64_t>(g, run, a, b, c, stream);
    default: throw Internal("[matmul] no CUDA GEMM for " + std::string(dtype_name(dtype)));
  }
}

}  // namespace weft::cuda
