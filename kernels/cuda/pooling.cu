// CUDA kernels of the pooling ops (kernels/cpu/pooling.cpp is the reference): MaxPool, AvgPool,
// MaxPoolGrad, MaxPoolGradGrad and AvgPoolGrad for float32, float64, float16 and bfloat16, NHWC,
// the 16-bit types computed in float and rounded once.
//
// Straightforward kernels, one thread per element, grid-stride: the forward ops and
// MaxPoolGradGrad per output element (reading its window); the two gradients per input element,
// gathering from the outputs whose windows cover it, so no atomics are needed and each sum is
// taken in the CPU's order (windows in row-major order) from the same terms. MaxPoolGrad finds
// each covering window's first maximum again, as MaxPoolGradGrad does: cheap for pooling's small
// windows, and the rule (first in window order, NaN-sticky) is the CPU's.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/activation_attr.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/pooling_kernel_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

// The window of output (oh, ow), clipped to the input: [h0, h1) x [w0, w1).
struct DevWindow {
  int64_t h0, h1, w0, w1;
};
__device__ __forceinline__ DevWindow dev_window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t hs = oh * g.sh - g.pad_top, ws = ow * g.sw - g.pad_left;
  return {hs > 0 ? hs : 0, hs + g.kh < g.h ? hs + g.kh : g.h, ws > 0 ? ws : 0, ws + g.kw < g.w ? ws + g.kw : g.w};
}

// The offset (within the image) of channel ch's first maximum in window (oh, ow): NaN-sticky, a
// later cell wins only when strictly larger, as on the CPU.
template <class T>
__device__ int64_t dev_argmax(const PoolGeometry& g, const T* img, int64_t oh, int64_t ow, int64_t ch) {
  using C = Compute<T>;
  const DevWindow win = dev_window(g, oh, ow);
  int64_t arg = (win.h0 * g.w + win.w0) * g.c + ch;
  C best = to_compute(img[arg]);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const int64_t at = (h * g.w + w) * g.c + ch;
      const C v = to_compute(img[at]);
      if (best == best && (v > best || v != v)) {
        best = v;
        arg = at;
      }
    }
  return arg;
}

// Output element i = ((img * out_h + oh) * out_w + ow) * c + ch.
struct OutIndex {
  int64_t img, oh, ow, ch;
};
__device__ __forceinline__ OutIndex out_index(const PoolGeometry& g, int64_t i) {
  const int64_t ch = i % g.c;
  int64_t r = i / g.c;
  const int64_t ow = r % g.out_w;
  r /= g.out_w;
  return {r / g.out_h, r % g.out_h, ow, ch};
}

template <class T>
__global__ void max_pool_kernel(PoolGeometry g, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const OutIndex o = out_index(g, i);
    const T* img = x + o.img * g.h * g.w * g.c;
    y[i] = img[dev_argmax(g, img, o.oh, o.ow, o.ch)];
  }
}

template <class T>
__global__ void avg_pool_kernel(PoolGeometry g, const T* x, T* y, int64_t n) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const OutIndex o = out_index(g, i);
    const T* img = x + o.img * g.h * g.w * g.c;
    const DevWindow win = dev_window(g, o.oh, o.ow);
    C s = 0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) s += to_compute(img[(h * g.w + w) * g.c + o.ch]);
    const C inv = C(1) / static_cast<C>((win.h1 - win.h0) * (win.w1 - win.w0));  // the valid cells only
    y[i] = from_compute<T>(s * inv);
  }
}

template <class T>
__global__ void max_pool_grad_grad_kernel(PoolGeometry g, const T* x, const T* ddx, T* ddy, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const OutIndex o = out_index(g, i);
    const int64_t base = o.img * g.h * g.w * g.c;
    ddy[i] = ddx[base + dev_argmax(g, x + base, o.oh, o.ow, o.ch)];
  }
}

// The outputs whose windows cover input row (or column) `at`: [lo, hi).
__device__ __forceinline__ void covering(int64_t at, int64_t pad, int64_t k, int64_t s, int64_t out, int64_t* lo,
                                         int64_t* hi) {
  const int64_t first = at + pad - k + 1;  // the lowest window start that still reaches `at`
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  const int64_t last = (at + pad) / s + 1;
  *hi = last < out ? last : out;
}

// Input element i = ((img * h + ih) * w + iw) * c + ch.
template <class T, bool kMax>
__global__ void pool_grad_kernel(PoolGeometry g, const T* x, const T* dy, T* dx, int64_t n) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = i % g.c;
    int64_t r = i / g.c;
    const int64_t iw = r % g.w;
    r /= g.w;
    const int64_t ih = r % g.h, img = r / g.h;
    const int64_t here = (ih * g.w + iw) * g.c + ch;
    int64_t oh0, oh1, ow0, ow1;
    covering(ih, g.pad_top, g.kh, g.sh, g.out_h, &oh0, &oh1);
    covering(iw, g.pad_left, g.kw, g.sw, g.out_w, &ow0, &ow1);
    const T* d = dy + img * g.out_h * g.out_w * g.c;
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const C v = to_compute(d[(oh * g.out_w + ow) * g.c + ch]);
        if constexpr (kMax) {
          if (dev_argmax(g, x + img * g.h * g.w * g.c, oh, ow, ch) == here) s += v;
        } else {
          const DevWindow win = dev_window(g, oh, ow);
          s += v * (C(1) / static_cast<C>((win.h1 - win.h0) * (win.w1 - win.w0)));
        }
      }
    dx[i] = from_compute<T>(s);
  }
}


template <class T>
const T* in_data(const KernelContext& c, int i) {
  return static_cast<const T*>(raw_data(c.input(i)));
}
template <class T>
T* out_data(const KernelContext& c) {
  return static_cast<T*>(raw_data(c.output(0)));
}

template <class T>
void max_pool(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const int64_t n = c.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(c);
  const LaunchGeometry lg = launch_geometry(n);
  max_pool_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(g, in_data<T>(c, 0), out_data<T>(c), n);
  check_launch(c);
}

template <class T>
void avg_pool(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const int64_t n = c.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(c);
  const LaunchGeometry lg = launch_geometry(n);
  avg_pool_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(g, in_data<T>(c, 0), out_data<T>(c), n);
  check_launch(c);
}

template <class T>
void max_pool_grad_grad(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const int64_t n = c.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(c);
  const LaunchGeometry lg = launch_geometry(n);
  max_pool_grad_grad_kernel<T>
      <<<lg.blocks, lg.threads, 0, cu.stream>>>(g, in_data<T>(c, 0), in_data<T>(c, 2), out_data<T>(c), n);
  check_launch(c);
}

template <class T>
void max_pool_grad(KernelContext& c) {
  refuse_activation(c);
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const int64_t n = c.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(c);
  const LaunchGeometry lg = launch_geometry(n);
  pool_grad_kernel<T, true>
      <<<lg.blocks, lg.threads, 0, cu.stream>>>(g, in_data<T>(c, 0), in_data<T>(c, 2), out_data<T>(c), n);
  check_launch(c);
}

template <class T>
void avg_pool_grad(KernelContext& c) {
  const PoolGeometry g = avg_pool_grad_geometry(c);
  const int64_t n = c.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(c);
  const LaunchGeometry lg = launch_geometry(n);
  pool_grad_kernel<T, false>
      <<<lg.blocks, lg.threads, 0, cu.stream>>>(g, nullptr, in_data<T>(c, 0), out_data<T>(c), n);
  check_launch(c);
}

template <class T>
void register_dtype(DType dt) {
  register_kernel("MaxPool", DeviceType::CUDA, dt, max_pool<T>);
  register_kernel("AvgPool", DeviceType::CUDA, dt, avg_pool<T>);
  register_kernel("MaxPoolGrad", DeviceType::CUDA, dt, max_pool_grad<T>);
  register_kernel("MaxPoolGradGrad", DeviceType::CUDA, dt, max_pool_grad_grad<T>);
  register_kernel("AvgPoolGrad", DeviceType::CUDA, dt, avg_pool_grad<T>);
}

}  // namespace

void register_pooling_kernels() {
  register_dtype<float>(float32);
  register_dtype<double>(float64);
  register_dtype<Half>(float16);
  register_dtype<BFloat16>(bfloat16);
}

}  // namespace weft::cuda
