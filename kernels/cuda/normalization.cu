// CUDA kernels of FusedBatchNorm and FusedBatchNormGrad (kernels/cpu/normalization.cpp is the
// reference): float32 and float64 x with parameters of the same type, float16 / bfloat16 x with
// float32 parameters, computed in float and rounded once.
//
// Straightforward kernels: one thread per channel for the per-channel sums (x is [rows, C] with
// channels contiguous, so a warp's loads of one row are coalesced), accumulating in double as the
// CPU does, then one thread per element for the affine map. A batch with few channels leaves most
// of the GPU idle in the sums; a block-per-channel-group reduction is the next step when it shows.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

namespace {

constexpr int kChannelThreads = 128;

// Per channel: the statistics (training: from x; inference: the given ones), and the affine map
// y = x * a + b, a and b kept in `ab` ([2, C], in P).
template <class T, class P>
__global__ void batch_norm_stats_kernel(const T* x, const P* scale, const P* offset, const P* mean_in,
                                        const P* var_in, P* mean_out, P* var_out, P* inv_out, P* ab, int64_t rows,
                                        int64_t c, double eps, bool training) {
  const int64_t ch = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  double mean, var;
  if (training) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += static_cast<double>(to_compute(x[r * c + ch]));
    mean = s / static_cast<double>(rows);
    double q = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d = static_cast<double>(to_compute(x[r * c + ch])) - mean;
      q += d * d;
    }
    var = q / static_cast<double>(rows);
  } else {
    mean = static_cast<double>(mean_in[ch]);
    var = static_cast<double>(var_in[ch]);
  }
  const double inv = 1.0 / sqrt(var + eps);
  mean_out[ch] = static_cast<P>(mean);
  var_out[ch] = static_cast<P>(var);
  inv_out[ch] = static_cast<P>(inv);
  const double sc = static_cast<double>(scale[ch]);
  ab[ch] = static_cast<P>(inv * sc);
  ab[c + ch] = static_cast<P>(static_cast<double>(offset[ch]) - mean * inv * sc);
}

template <class T, class P>
__global__ void affine_kernel(const T* x, const P* ab, T* y, int64_t n, int64_t c) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = i % c;
    y[i] = from_compute<T>(to_compute(x[i]) * static_cast<C>(ab[ch]) + static_cast<C>(ab[c + ch]));
  }
}

// Per channel: doffset, dscale, and the coefficients of dx = dy * k + xhat * q + p (see the CPU's).
template <class T, class P>
__global__ void batch_norm_grad_sums_kernel(const T* dy, const T* x, const P* scale, const P* mean, const P* inv,
                                            P* dscale, P* doffset, P* coef, int64_t rows, int64_t c, bool training) {
  const int64_t ch = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  const double mu = static_cast<double>(mean[ch]), iv = static_cast<double>(inv[ch]);
  double s = 0, sx = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double g = static_cast<double>(to_compute(dy[r * c + ch]));
    s += g;
    sx += g * (static_cast<double>(to_compute(x[r * c + ch])) - mu) * iv;
  }
  doffset[ch] = static_cast<P>(s);
  dscale[ch] = static_cast<P>(sx);
  const double m = static_cast<double>(rows > 0 ? rows : 1);
  const double si = static_cast<double>(scale[ch]) * iv;
  coef[ch] = static_cast<P>(si);
  coef[c + ch] = static_cast<P>(training ? -si * sx / m : 0.0);
  coef[2 * c + ch] = static_cast<P>(training ? -si * s / m : 0.0);
}

template <class T, class P>
__global__ void batch_norm_dx_kernel(const T* dy, const T* x, const P* mean, const P* inv, const P* coef, T* dx,
                                     int64_t n, int64_t c) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = i % c;
    const C iv = static_cast<C>(inv[ch]);
    const C xhat = to_compute(x[i]) * iv - static_cast<C>(mean[ch]) * iv;
    dx[i] = from_compute<T>(to_compute(dy[i]) * static_cast<C>(coef[ch]) + xhat * static_cast<C>(coef[c + ch]) +
                            static_cast<C>(coef[2 * c + ch]));
  }
}

int64_t channels(const Tensor& x) { return x.shape()[x.shape().rank() - 1]; }

unsigned channel_blocks(int64_t c) { return static_cast<unsigned>((c + kChannelThreads - 1) / kChannelThreads); }

template <class T, class P>
void batch_norm(KernelContext& ctx) {
  const Tensor& xt = ctx.input(0);
  const int64_t c = channels(xt);
  if (c == 0) return;
  const int64_t rows = xt.size() / c;
  const bool training = ctx.attrs.get<bool>("is_training");
  const double eps = ctx.attrs.get_or<double>("epsilon", 1e-3);
  CudaContext& cu = cuda_context(ctx);
  Tensor ab = Tensor::empty(ctx.output(1).dtype(), Shape{2 * c}, &ctx.device);
  auto in = [&](int i) { return static_cast<const P*>(ctx.input(i).raw_data()); };
  auto out = [&](int i) { return static_cast<P*>(ctx.output(i).raw_data()); };
  batch_norm_stats_kernel<T, P><<<channel_blocks(c), kChannelThreads, 0, cu.stream>>>(
      static_cast<const T*>(xt.raw_data()), in(1), in(2), training ? nullptr : in(3), training ? nullptr : in(4),
      out(1), out(2), out(3), static_cast<P*>(ab.raw_data()), rows, c, eps, training);
  check_launch(ctx);
  const int64_t n = xt.size();
  if (n == 0) return;
  const LaunchGeometry lg = launch_geometry(n);
  affine_kernel<T, P><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      static_cast<const T*>(xt.raw_data()), static_cast<const P*>(ab.raw_data()),
      static_cast<T*>(ctx.output(0).raw_data()), n, c);
  check_launch(ctx);
}

template <class T, class P>
void batch_norm_grad(KernelContext& ctx) {
  const Tensor& xt = ctx.input(1);
  const int64_t c = channels(xt);
  if (c == 0) return;
  const int64_t rows = xt.size() / c;
  const bool training = ctx.attrs.get<bool>("is_training");
  CudaContext& cu = cuda_context(ctx);
  Tensor coef = Tensor::empty(ctx.output(1).dtype(), Shape{3 * c}, &ctx.device);
  auto in = [&](int i) { return static_cast<const P*>(ctx.input(i).raw_data()); };
  const T* dy = static_cast<const T*>(ctx.input(0).raw_data());
  const T* x = static_cast<const T*>(xt.raw_data());
  batch_norm_grad_sums_kernel<T, P><<<channel_blocks(c), kChannelThreads, 0, cu.stream>>>(
      dy, x, in(2), in(3), in(4), static_cast<P*>(ctx.output(1).raw_data()),
      static_cast<P*>(ctx.output(2).raw_data()), static_cast<P*>(coef.raw_data()), rows, c, training);
  check_launch(ctx);
  const int64_t n = xt.size();
  if (n == 0) return;
  const LaunchGeometry lg = launch_geometry(n);
  batch_norm_dx_kernel<T, P><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      dy, x, in(3), in(4), static_cast<const P*>(coef.raw_data()), static_cast<T*>(ctx.output(0).raw_data()), n, c);
  check_launch(ctx);
}

template <class T, class P>
void register_dtype(DType dt) {
  register_kernel("FusedBatchNorm", DeviceType::CUDA, dt, batch_norm<T, P>);
  register_kernel("FusedBatchNormGrad", DeviceType::CUDA, dt, batch_norm_grad<T, P>);
}

}  // namespace

void register_normalization_kernels() {
  register_dtype<float, float>(float32);
  register_dtype<double, double>(float64);
  register_dtype<Half, float>(float16);
  register_dtype<BFloat16, float>(bfloat16);
}

}  // namespace weft::cuda
