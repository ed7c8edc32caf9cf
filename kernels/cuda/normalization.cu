// CUDA kernels of FusedBatchNorm, FusedBatchNormGrad, LayerNorm and LayerNormGrad
// (kernels/cpu/normalization.cpp is the reference): float32 and float64 x with parameters of the
// same type, float16 / bfloat16 x with float32 parameters, computed in float and rounded once.
//
// Batch normalisation:
// Straightforward kernels: one thread per channel for the per-channel sums (x is [rows, C] with
// channels contiguous, so a warp's loads of one row are coalesced), accumulating in double as the
// CPU does, then one thread per element for the affine map. A batch with few channels leaves most
// of the GPU idle in the sums; a block-per-channel-group reduction is the next step when it shows.
//
// Layer normalisation, x viewed as [rows, n]: one warp per row (rows up to kWarpRowMax) or one
// block, which sums the row's shifted values and their squares in double (the CPU's one-pass
// statistics, kernels/cpu/normalization.cpp says why they are sound), combines them in a fixed
// order, then normalises the row. The gradient's dx the same way; its column sums (dgamma, dbeta)
// over fixed chunks of rows into double partials, added in chunk order by a second kernel. The
// bits are the same on every run, though not the CPU's (another order of additions).
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "kernels/activation_attr.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/cuda/reduce_device.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

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
  refuse_activation(ctx);
  const Tensor& xt = ctx.input(0);
  const int64_t c = channels(xt);
  if (c == 0) return;
  const int64_t rows = xt.size() / c;
  const bool training = ctx.attrs.get<bool>("is_training");
  const double eps = ctx.attrs.get_or<double>("epsilon", 1e-3);
  CudaContext& cu = cuda_context(ctx);
  Tensor ab = Tensor::empty(ctx.output(1).dtype(), Shape{2 * c}, &ctx.device);
  auto in = [&](int i) { return static_cast<const P*>(raw_data(ctx.input(i))); };
  auto out = [&](int i) { return static_cast<P*>(raw_data(ctx.output(i))); };
  batch_norm_stats_kernel<T, P><<<channel_blocks(c), kChannelThreads, 0, cu.stream>>>(
      static_cast<const T*>(raw_data(xt)), in(1), in(2), training ? nullptr : in(3), training ? nullptr : in(4),
      out(1), out(2), out(3), static_cast<P*>(raw_data(ab)), rows, c, eps, training);
  check_launch(ctx);
  const int64_t n = xt.size();
  if (n == 0) return;
  const LaunchGeometry lg = launch_geometry(n);
  affine_kernel<T, P><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      static_cast<const T*>(raw_data(xt)), static_cast<const P*>(raw_data(ab)),
      static_cast<T*>(raw_data(ctx.output(0))), n, c);
  check_launch(ctx);
}

template <class T, class P>
void batch_norm_grad(KernelContext& ctx) {
  refuse_activation(ctx);
  const Tensor& xt = ctx.input(1);
  const int64_t c = channels(xt);
  if (c == 0) return;
  const int64_t rows = xt.size() / c;
  const bool training = ctx.attrs.get<bool>("is_training");
  CudaContext& cu = cuda_context(ctx);
  Tensor coef = Tensor::empty(ctx.output(1).dtype(), Shape{3 * c}, &ctx.device);
  auto in = [&](int i) { return static_cast<const P*>(raw_data(ctx.input(i))); };
  const T* dy = static_cast<const T*>(raw_data(ctx.input(0)));
  const T* x = static_cast<const T*>(raw_data(xt));
  batch_norm_grad_sums_kernel<T, P><<<channel_blocks(c), kChannelThreads, 0, cu.stream>>>(
      dy, x, in(2), in(3), in(4), static_cast<P*>(raw_data(ctx.output(1))),
      static_cast<P*>(raw_data(ctx.output(2))), static_cast<P*>(raw_data(coef)), rows, c, training);
  check_launch(ctx);
  const int64_t n = xt.size();
  if (n == 0) return;
  const LaunchGeometry lg = launch_geometry(n);
  batch_norm_dx_kernel<T, P><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      dy, x, in(3), in(4), static_cast<const P*>(raw_data(coef)), static_cast<T*>(raw_data(ctx.output(0))), n, c);
  check_launch(ctx);
}

// ---- Layer normalisation ----

// The sum over the warp or the block, in every thread (a fixed order of additions).
template <bool kWarp>
__device__ __forceinline__ double group_sum(double v, double* scratch) {
  return group_combine<kWarp>(v, AddCombine{}, scratch);
}

template <class T, class P, bool kWarp>
__global__ void layer_norm_kernel(const T* x, const P* gamma, const P* beta, T* y, P* mean_out, P* rstd_out,
                                  int64_t rows, int64_t n, double eps) {
  using C = Compute<T>;
  __shared__ double scratch[32];
  const RowGroup<kWarp> g;
  for (int64_t row = g.first; row < rows; row += g.stride) {  // uniform per group
    const T* px = x + row * n;
    const double shift = static_cast<double>(to_compute(px[0]));
    double s1 = 0, s2 = 0;
    for (int64_t j = g.lane; j < n; j += g.lanes) {
      const double d = static_cast<double>(to_compute(px[j])) - shift;
      s1 += d;
      s2 += d * d;
    }
    s1 = group_sum<kWarp>(s1, scratch);
    s2 = group_sum<kWarp>(s2, scratch);
    const double m = s1 / static_cast<double>(n);
    const double var = fmax(s2 / static_cast<double>(n) - m * m, 0.0);
    const double mean = shift + m, rstd = 1.0 / sqrt(var + eps);
    if (g.lane == 0) {
      mean_out[row] = static_cast<P>(mean);
      rstd_out[row] = static_cast<P>(rstd);
    }
    // The mean as a pair mc + mc_lo, as on the CPU (which says why).
    const C mc = static_cast<C>(mean), mc_lo = static_cast<C>(mean - static_cast<double>(mc));
    const C rc = static_cast<C>(rstd);
    T* py = y + row * n;
    for (int64_t j = g.lane; j < n; j += g.lanes)
      py[j] = from_compute<T>(((to_compute(px[j]) - mc) - mc_lo) * rc * static_cast<C>(gamma[j]) +
                              static_cast<C>(beta[j]));
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, per row.
template <class T, class P, bool kWarp>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const P* gamma, const P* mean, const P* rstd, T* dx,
                                     int64_t rows, int64_t n) {
  using C = Compute<T>;
  __shared__ double scratch[32];
  const RowGroup<kWarp> g;
  for (int64_t row = g.first; row < rows; row += g.stride) {
    const T* pdy = dy + row * n;
    const T* px = x + row * n;
    const double m = static_cast<double>(mean[row]), rs = static_cast<double>(rstd[row]);
    double sg = 0, sgx = 0;
    for (int64_t j = g.lane; j < n; j += g.lanes) {
      const double gj = static_cast<double>(to_compute(pdy[j])) * static_cast<double>(gamma[j]);
      sg += gj;
      sgx += gj * ((static_cast<double>(to_compute(px[j])) - m) * rs);
    }
    sg = group_sum<kWarp>(sg, scratch);
    sgx = group_sum<kWarp>(sgx, scratch);
    const C a = static_cast<C>(sg / static_cast<double>(n)), b = static_cast<C>(sgx / static_cast<double>(n));
    const C mc = static_cast<C>(mean[row]), rc = static_cast<C>(rstd[row]);
    T* out = dx + row * n;
    for (int64_t j = g.lane; j < n; j += g.lanes) {
      const C xh = (to_compute(px[j]) - mc) * rc;
      out[j] = from_compute<T>(rc * (to_compute(pdy[j]) * static_cast<C>(gamma[j]) - a - xh * b));
    }
  }
}

// Chunk blockIdx.y of the rows, columns of blockIdx.x: sum(dy * xhat) and sum(dy) per column into
// part[chunk, 0 .. n) and part[chunk, n .. 2n). A warp reads a contiguous run of a row.
template <class T, class P>
__global__ void layer_norm_column_part_kernel(const T* dy, const T* x, const P* mean, const P* rstd, double* part,
                                              int64_t rows, int64_t n, int64_t chunk_rows) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  double sgx = 0, sg = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const double d = static_cast<double>(to_compute(dy[r * n + j]));
    sgx += d * ((static_cast<double>(to_compute(x[r * n + j])) - static_cast<double>(mean[r])) *
                static_cast<double>(rstd[r]));
    sg += d;
  }
  part[blockIdx.y * 2 * n + j] = sgx;
  part[blockIdx.y * 2 * n + n + j] = sg;
}

template <class P>
__global__ void layer_norm_column_total_kernel(const double* part, P* dgamma, P* dbeta, int64_t n, int64_t chunks) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  double sgx = 0, sg = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    sgx += part[c * 2 * n + j];
    sg += part[c * 2 * n + n + j];
  }
  dgamma[j] = static_cast<P>(sgx);
  dbeta[j] = static_cast<P>(sg);
}

__global__ void fill_nan_kernel(float* a, float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    a[i] = b[i] = NAN;
}
__global__ void fill_nan_kernel(double* a, double* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    a[i] = b[i] = NAN;
}

struct LayerRows {
  int64_t rows = 1, n = 1;
};
LayerRows layer_rows(const Tensor& x, const Attrs& attrs) {
  const Shape& s = x.shape();
  int64_t axis = attrs.get_or<int64_t>("axis", -1);
  if (axis < 0) axis += s.rank();
  LayerRows v;
  for (int64_t i = 0; i < s.rank(); ++i) (i < axis ? v.rows : v.n) *= s[i];
  return v;
}

// Launches kernel<kWarp> over the rows: a warp per row up to kWarpRowMax elements, else a block.
template <class Launch>
void launch_rows(const LayerRows& v, Launch launch) {
  if (v.n <= kWarpRowMax) launch(std::true_type{}, static_cast<unsigned>(warp_item_blocks(v.rows)));
  else launch(std::false_type{}, static_cast<unsigned>(std::min(v.rows, kMaxReduceBlocks)));
}

template <class T, class P>
void layer_norm(KernelContext& ctx) {
  const LayerRows v = layer_rows(ctx.input(0), ctx.attrs);
  if (v.rows == 0) return;
  CudaContext& cu = cuda_context(ctx);
  P* mean = static_cast<P*>(raw_data(ctx.output(1)));
  P* rstd = static_cast<P*>(raw_data(ctx.output(2)));
  if (v.n == 0) {  // no statistics, as on the CPU
    const LaunchGeometry lg = launch_geometry(v.rows);
    fill_nan_kernel<<<lg.blocks, lg.threads, 0, cu.stream>>>(mean, rstd, v.rows);
    check_launch(ctx);
    return;
  }
  const double eps = ctx.attrs.get_or<double>("epsilon", 1e-5);
  auto in = [&](int i) { return static_cast<const P*>(raw_data(ctx.input(i))); };
  const T* x = static_cast<const T*>(raw_data(ctx.input(0)));
  T* y = static_cast<T*>(raw_data(ctx.output(0)));
  launch_rows(v, [&](auto warp, unsigned blocks) {
    layer_norm_kernel<T, P, decltype(warp)::value>
        <<<blocks, kReduceThreads, 0, cu.stream>>>(x, in(1), in(2), y, mean, rstd, v.rows, v.n, eps);
  });
  check_launch(ctx);
}

template <class T, class P>
void layer_norm_grad(KernelContext& ctx) {
  const LayerRows v = layer_rows(ctx.input(1), ctx.attrs);
  if (v.n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  auto in = [&](int i) { return static_cast<const P*>(raw_data(ctx.input(i))); };
  const T* dy = static_cast<const T*>(raw_data(ctx.input(0)));
  const T* x = static_cast<const T*>(raw_data(ctx.input(1)));
  if (v.rows > 0) {
    launch_rows(v, [&](auto warp, unsigned blocks) {
      layer_norm_dx_kernel<T, P, decltype(warp)::value><<<blocks, kReduceThreads, 0, cu.stream>>>(
          dy, x, in(2), in(3), in(4), static_cast<T*>(raw_data(ctx.output(0))), v.rows, v.n);
    });
    check_launch(ctx);
  }
  // Chunks of rows fixed by the shape (at least 64 rows, at most 1024 chunks), so the partials and
  // the order they are added in never change.
  const int64_t chunk_rows = std::max<int64_t>(64, (v.rows + 1023) / 1024);
  const int64_t chunks = (v.rows + chunk_rows - 1) / chunk_rows;
  const unsigned column_blocks = static_cast<unsigned>((v.n + kReduceThreads - 1) / kReduceThreads);
  Tensor part = Tensor::empty(DType::Float64, Shape{std::max<int64_t>(chunks, 1) * 2 * v.n}, &ctx.device);
  double* pp = static_cast<double*>(raw_data(part));
  if (chunks > 0) {
    layer_norm_column_part_kernel<T, P><<<dim3(column_blocks, static_cast<unsigned>(chunks)), kReduceThreads, 0,
                                          cu.stream>>>(dy, x, in(3), in(4), pp, v.rows, v.n, chunk_rows);
    check_launch(ctx);
  }
  layer_norm_column_total_kernel<P><<<column_blocks, kReduceThreads, 0, cu.stream>>>(
      pp, static_cast<P*>(raw_data(ctx.output(1))), static_cast<P*>(raw_data(ctx.output(2))), v.n, chunks);
  check_launch(ctx);
}

template <class T, class P>
void register_dtype(DType dt) {
  register_kernel("FusedBatchNorm", DeviceType::CUDA, dt, batch_norm<T, P>);
  register_kernel("FusedBatchNormGrad", DeviceType::CUDA, dt, batch_norm_grad<T, P>);
  register_kernel("LayerNorm", DeviceType::CUDA, dt, layer_norm<T, P>);
  register_kernel("LayerNormGrad", DeviceType::CUDA, dt, layer_norm_grad<T, P>);
}

}  // namespace

void register_normalization_kernels() {
  register_dtype<float, float>(float32);
  register_dtype<double, double>(float64);
  register_dtype<Half, float>(float16);
  register_dtype<BFloat16, float>(bfloat16);
}

}  // namespace weft::cuda
