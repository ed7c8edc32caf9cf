// CUDA kernels of the fused optimizer updates (kernels/cpu/training.cpp): ApplyGradientDescent,
// ApplyMomentum (with nesterov), ApplyAdam and ApplyAdamW, float32 and float64 (the dtypes the op
// definitions accept), updating the variable and slot buffers in place on the compute stream, in
// one pass; and GlobalSquaredNorm (all four float dtypes), at the end of the file.
//
// Bit-identical to the CPU: the same expressions in the same type and order, each multiply, add
// and divide rounded on its own (__fmul_rn etc.: nvcc would otherwise contract a * b + c into an
// FMA, which the CPU build never does), and sqrt and division correctly rounded on both.
//
// The learning rate is the "lr" attribute or, when present, the op's last input (a float64 scalar
// computed in the graph); on the GPU that input is read by the kernel itself, so the update never
// waits for the device. ApplyAdamW's decay factor comes the same way ("decay", the last input).
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/cuda/reduce_device.cuh"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
__device__ __forceinline__ T mul(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
}
template <class T>
__device__ __forceinline__ T add(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return __fadd_rn(a, b);
  else return __dadd_rn(a, b);
}
template <class T>
__device__ __forceinline__ T sub(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return __fsub_rn(a, b);
  else return __dsub_rn(a, b);
}
template <class T>
__device__ __forceinline__ T div(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return __fdiv_rn(a, b);
  else return __ddiv_rn(a, b);
}
template <class T>
__device__ __forceinline__ T root(T a) {
  if constexpr (std::is_same_v<T, float>) return __fsqrt_rn(a);
  else return __dsqrt_rn(a);
}

// The learning rate: the graph's float64 scalar on the device when there is one, else the host's.
struct LearningRate {
  const double* device = nullptr;
  double host = 0;
  template <class T>
  __device__ __forceinline__ T get() const { return static_cast<T>(device ? *device : host); }
};

template <class T>
__global__ void gradient_descent_kernel(T* __restrict__ w, const T* __restrict__ g, int64_t n, LearningRate rate) {
  const T lr = rate.get<T>();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) w[i] = sub(w[i], mul(lr, g[i]));
}

template <class T>
__global__ void momentum_kernel(T* __restrict__ w, T* __restrict__ acc, const T* __restrict__ g, int64_t n,
                                LearningRate rate, T mu, bool nesterov) {
  const T lr = rate.get<T>();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T step = mul(lr, g[i]);
    const T a = sub(mul(mu, acc[i]), step);  // velocity = mu * velocity - lr * g
    acc[i] = a;
    w[i] = add(w[i], nesterov ? sub(mul(mu, a), step) : a);
  }
}

template <class T>
__global__ void adam_kernel(T* __restrict__ w, T* __restrict__ m, T* __restrict__ v, const T* __restrict__ g,
                            int64_t n, LearningRate rate, T b1, T b2, T eps) {
  const T lr = rate.get<T>();  // already bias-corrected
  const T one_b1 = sub(T(1), b1), one_b2 = sub(T(1), b2);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T gi = g[i];
    const T mi = add(mul(b1, m[i]), mul(one_b1, gi));
    const T vi = add(mul(b2, v[i]), mul(mul(one_b2, gi), gi));  // (1 - b2) * g * g, left to right
    m[i] = mi;
    v[i] = vi;
    w[i] = sub(w[i], div(mul(lr, mi), add(root(vi), eps)));
  }
}

// Keras' AdamW order (kernels/cpu/training.cpp): the decay from the variable before this step,
// then Adam's step.
template <class T>
__global__ void adamw_kernel(T* __restrict__ w, T* __restrict__ m, T* __restrict__ v, const T* __restrict__ g,
                             int64_t n, LearningRate rate, LearningRate decay_rate, T b1, T b2, T eps) {
  const T lr = rate.get<T>();  // already bias-corrected
  const T decay = decay_rate.get<T>();
  const T one_b1 = sub(T(1), b1), one_b2 = sub(T(1), b2);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T gi = g[i], wi = w[i];
    const T decayed = sub(wi, mul(decay, wi));
    const T mi = add(mul(b1, m[i]), mul(one_b1, gi));
    const T vi = add(mul(b2, v[i]), mul(mul(one_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    w[i] = sub(decayed, div(mul(lr, mi), add(root(vi), eps)));
  }
}

// Rate `index` of those after the op's tensors: that input (where it lives) or the attribute.
LearningRate rate(const KernelContext& ctx, int index, const char* attr) {
  LearningRate r;
  const int input = ctx.op.min_inputs + index;
  if (static_cast<int>(ctx.inputs.size()) > input) {
    const Tensor& t = ctx.inputs[static_cast<size_t>(input)];
    if (t.size() != 1)
      ctx.fail(std::string("the '") + attr + "' input must be a float64 scalar, got " + t.shape().to_string());
    if (t.device_ptr() && t.device_ptr()->type() == DeviceType::CUDA) r.device = static_cast<const double*>(raw_data(t));
    else r.host = t.item<double>();
  } else {
    r.host = ctx.attrs.get<double>(attr);
  }
  return r;
}

LearningRate learning_rate(const KernelContext& ctx) { return rate(ctx, 0, "lr"); }

// The op definitions guarantee equal shapes; a kernel given others must not write out of bounds.
int64_t checked_size(const KernelContext& ctx, int tensors) {
  const int64_t n = ctx.input(0).size();
  for (int i = 1; i < tensors; ++i)
    if (ctx.input(i).size() != n)
      ctx.fail("input " + std::to_string(i) + " has shape " + ctx.input(i).shape().to_string() +
               " but the variable has shape " + ctx.input(0).shape().to_string());
  return n;
}

template <class T>
T* writable(const Tensor& t) {
  return static_cast<T*>(raw_data(t));  // these ops own their inputs' buffers by contract
}

template <class T>
void gradient_descent(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t n = checked_size(ctx, 2);
  const LearningRate lr = learning_rate(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  if (lg.blocks == 0) return;
  gradient_descent_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      writable<T>(ctx.input(0)), static_cast<const T*>(raw_data(ctx.input(1))), n, lr);
  check_launch(ctx);
}

template <class T>
void momentum(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t n = checked_size(ctx, 3);
  const LearningRate lr = learning_rate(ctx);
  const T mu = static_cast<T>(ctx.attrs.get<double>("momentum"));
  const bool nesterov = ctx.attrs.get<bool>("nesterov");
  const LaunchGeometry lg = launch_geometry(n);
  if (lg.blocks == 0) return;
  momentum_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(writable<T>(ctx.input(0)), writable<T>(ctx.input(1)),
                                                              static_cast<const T*>(raw_data(ctx.input(2))), n, lr, mu,
                                                              nesterov);
  check_launch(ctx);
}

template <class T>
void adam(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t n = checked_size(ctx, 4);
  const LearningRate lr = learning_rate(ctx);
  const T b1 = static_cast<T>(ctx.attrs.get<double>("beta1"));
  const T b2 = static_cast<T>(ctx.attrs.get<double>("beta2"));
  const T eps = static_cast<T>(ctx.attrs.get<double>("epsilon"));
  const LaunchGeometry lg = launch_geometry(n);
  if (lg.blocks == 0) return;
  adam_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(writable<T>(ctx.input(0)), writable<T>(ctx.input(1)),
                                                          writable<T>(ctx.input(2)),
                                                          static_cast<const T*>(raw_data(ctx.input(3))), n, lr, b1, b2,
                                                          eps);
  check_launch(ctx);
}

template <class T>
void adamw(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t n = checked_size(ctx, 4);
  const LearningRate lr = rate(ctx, 0, "lr");
  const LearningRate decay = rate(ctx, 1, "decay");
  const T b1 = static_cast<T>(ctx.attrs.get<double>("beta1"));
  const T b2 = static_cast<T>(ctx.attrs.get<double>("beta2"));
  const T eps = static_cast<T>(ctx.attrs.get<double>("epsilon"));
  const LaunchGeometry lg = launch_geometry(n);
  if (lg.blocks == 0) return;
  adamw_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(writable<T>(ctx.input(0)), writable<T>(ctx.input(1)),
                                                           writable<T>(ctx.input(2)),
                                                           static_cast<const T*>(raw_data(ctx.input(3))), n, lr, decay,
                                                           b1, b2, eps);
  check_launch(ctx);
}

// GlobalSquaredNorm: each input's blocks write their sums of squares (float64, whatever the dtype)
// to a buffer of partials, and one block adds the partials up. The number of blocks depends on the
// input's size only and every combine happens in a fixed order, so the same gradients give the
// same bits on every run (and they differ from the CPU's block order only in the last bits).
constexpr unsigned kNormThreads = 256;
constexpr int64_t kNormElementsPerBlock = 8192;
constexpr int64_t kNormMaxBlocks = 256;

struct AddDoubles {
  __device__ double operator()(double a, double b) const { return a + b; }
};

int64_t norm_blocks(int64_t n) {
  const int64_t b = (n + kNormElementsPerBlock - 1) / kNormElementsPerBlock;
  return b < kNormMaxBlocks ? b : kNormMaxBlocks;
}

template <class T>
__global__ void squares_kernel(const T* __restrict__ x, int64_t n, double* __restrict__ partials) {
  __shared__ double scratch[32];
  double s = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double v = static_cast<double>(to_compute(x[i]));
    s = __dadd_rn(s, __dmul_rn(v, v));
  }
  s = block_combine(s, AddDoubles{}, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

template <class T>
__global__ void sum_partials_kernel(const double* __restrict__ partials, int64_t count, T* __restrict__ y) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s = __dadd_rn(s, partials[i]);
  s = block_combine(s, AddDoubles{}, scratch);
  if (threadIdx.x == 0) {
    if constexpr (kIs16BitFloat<T>) *y = from_compute<T>(static_cast<float>(s));  // as the CPU: via float32
    else *y = static_cast<T>(s);
  }
}

template <class T>
void global_squared_norm(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  int64_t count = 0;
  for (const Tensor& x : ctx.inputs) count += norm_blocks(x.size());
  // Freed when it goes: the allocator orders the free after the kernels queued on the stream.
  Tensor partials = Tensor::empty(uint8, Shape{(count > 0 ? count : 1) * static_cast<int64_t>(sizeof(double))}, &ctx.device);
  double* p = static_cast<double*>(raw_data(partials));
  int64_t at = 0;
  for (const Tensor& x : ctx.inputs) {
    const int64_t blocks = norm_blocks(x.size());
    if (blocks == 0) continue;
    squares_kernel<T><<<static_cast<unsigned>(blocks), kNormThreads, 0, cu.stream>>>(
        static_cast<const T*>(raw_data(x)), x.size(), p + at);
    check_launch(ctx);
    at += blocks;
  }
  sum_partials_kernel<T><<<1, kNormThreads, 0, cu.stream>>>(p, count, static_cast<T*>(raw_data(ctx.output(0))));
  check_launch(ctx);
}

}  // namespace

void register_training_kernels() {
  register_kernel("ApplyGradientDescent", DeviceType::CUDA, float32, gradient_descent<float>);
  register_kernel("ApplyGradientDescent", DeviceType::CUDA, float64, gradient_descent<double>);
  register_kernel("ApplyMomentum", DeviceType::CUDA, float32, momentum<float>);
  register_kernel("ApplyMomentum", DeviceType::CUDA, float64, momentum<double>);
  register_kernel("ApplyAdam", DeviceType::CUDA, float32, adam<float>);
  register_kernel("ApplyAdam", DeviceType::CUDA, float64, adam<double>);
  register_kernel("ApplyAdamW", DeviceType::CUDA, float32, adamw<float>);
  register_kernel("ApplyAdamW", DeviceType::CUDA, float64, adamw<double>);
  register_kernel("GlobalSquaredNorm", DeviceType::CUDA, float32, global_squared_norm<float>);
  register_kernel("GlobalSquaredNorm", DeviceType::CUDA, float64, global_squared_norm<double>);
  register_kernel("GlobalSquaredNorm", DeviceType::CUDA, float16, global_squared_norm<Half>);
  register_kernel("GlobalSquaredNorm", DeviceType::CUDA, bfloat16, global_squared_norm<BFloat16>);
}

}  // namespace weft::cuda
