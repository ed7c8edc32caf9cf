// CPU kernels of the pooling ops (kernels/defs/pooling.cpp), NHWC.
//
// oneDNN would be the library of choice for float32 pooling; for this round the kernels are plain
// loops, written so the compiler vectorises them: channels are innermost and contiguous, so every
// window cell is one unit-stride pass over C values, and the per-channel running max / sum /
// argmax live in small arrays of C. The forward ops and MaxPoolGradGrad write each output row
// [out_w, C] once and run in parallel over (image, output row). The two gradients scatter into
// overlapping input cells, so they run in parallel over images only, each image's dx owned by one
// task (no atomics, and the sums' order does not depend on the thread count).
//
// Max pooling takes the first maximum in window order (row by row, left to right), NaN-sticky as
// Max does (a NaN wins and stays); its gradient goes to that same cell, as TensorFlow's does.
// SAME average pooling divides by the number of cells inside the input, not by the window's size.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/pooling_kernel_geometry.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

// The geometry of the node from x's (or, for AvgPoolGrad, input_sizes') concrete shape.

// The rows and columns of the input that the window of output (oh, ow) covers, clipped to it.
struct Window {
  int64_t h0, h1, w0, w1;  // [h0, h1) x [w0, w1)
};
inline Window window_at(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t hs = oh * g.sh - g.pad_top, ws = ow * g.sw - g.pad_left;
  return {std::max<int64_t>(hs, 0), std::min(hs + g.kh, g.h), std::max<int64_t>(ws, 0), std::min(ws + g.kw, g.w)};
}

// Rows of output (image, output row) per task: about kCheapGrain window cells of work each.
int64_t row_grain(const PoolGeometry& g) {
  const int64_t per_row = std::max<int64_t>(1, g.out_w * g.c * g.kh * g.kw);
  return std::max<int64_t>(1, kCheapGrain / per_row);
}

// For every channel of output (oh, ow) of image `img`: the first maximal cell's offset into the
// image (in elements, channel 0) into arg, and its value into best.
template <class T>
void argmax_window(const PoolGeometry& g, const T* img, int64_t oh, int64_t ow, T* best, int64_t* arg) {
  const Window win = window_at(g, oh, ow);
  const int64_t first = (win.h0 * g.w + win.w0) * g.c;
  std::copy(img + first, img + first + g.c, best);
  std::fill(arg, arg + g.c, first);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const int64_t at = (h * g.w + w) * g.c;
      const T* v = img + at;
      for (int64_t ch = 0; ch < g.c; ++ch) {
        const bool take = takes_max(v[ch], best[ch]) && best[ch] == best[ch];  // NaN sticks at the first
        best[ch] = take ? v[ch] : best[ch];
        arg[ch] = take ? at : arg[ch];
      }
    }
}

template <class T>
void max_pool_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  T* y = c.output(0).data<T>();
  if (c.output(0).size() == 0) return;
  c.pool().parallel_for(g.n * g.out_h, row_grain(g), [&](int64_t begin, int64_t end) {
    std::vector<T> best(static_cast<size_t>(g.c));
    std::vector<int64_t> arg(static_cast<size_t>(g.c));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t img = r / g.out_h, oh = r % g.out_h;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        argmax_window(g, x + img * g.h * g.w * g.c, oh, ow, best.data(), arg.data());
        std::copy(best.begin(), best.end(), y + ((img * g.out_h + oh) * g.out_w + ow) * g.c);
      }
    }
  });
}

template <class T>
void avg_pool_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  T* y = c.output(0).data<T>();
  if (c.output(0).size() == 0) return;
  c.pool().parallel_for(g.n * g.out_h, row_grain(g), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t img = r / g.out_h, oh = r % g.out_h;
      const T* in = x + img * g.h * g.w * g.c;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        T* out = y + ((img * g.out_h + oh) * g.out_w + ow) * g.c;
        std::fill(out, out + g.c, T(0));
        const Window win = window_at(g, oh, ow);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) {
            const T* v = in + (h * g.w + w) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) out[ch] += v[ch];
          }
        const T inv = T(1) / static_cast<T>((win.h1 - win.h0) * (win.w1 - win.w0));  // the valid cells only
        for (int64_t ch = 0; ch < g.c; ++ch) out[ch] *= inv;
      }
    }
  });
}

// MaxPoolGrad(x, y, dy): each window's dy added to its first maximum.
template <class T>
void max_pool_grad_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  const T* dy = c.input(2).data<T>();
  T* dx = c.output(0).data<T>();
  const int64_t image = g.h * g.w * g.c, pooled = g.out_h * g.out_w * g.c;
  std::fill(dx, dx + c.output(0).size(), T(0));
  if (c.input(2).size() == 0) return;
  c.pool().parallel_for(g.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> best(static_cast<size_t>(g.c));
    std::vector<int64_t> arg(static_cast<size_t>(g.c));
    for (int64_t img = begin; img < end; ++img)
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          argmax_window(g, x + img * image, oh, ow, best.data(), arg.data());
          const T* d = dy + img * pooled + (oh * g.out_w + ow) * g.c;
          T* out = dx + img * image;
          for (int64_t ch = 0; ch < g.c; ++ch) out[arg[ch] + ch] += d[ch];
        }
  });
}

// MaxPoolGradGrad(x, y, ddx): ddy at each window is ddx at the window's first maximum
// (MaxPoolGrad is linear in dy, and this is its transpose).
template <class T>
void max_pool_grad_grad_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  const T* ddx = c.input(2).data<T>();
  T* ddy = c.output(0).data<T>();
  const int64_t image = g.h * g.w * g.c;
  if (c.output(0).size() == 0) return;
  c.pool().parallel_for(g.n * g.out_h, row_grain(g), [&](int64_t begin, int64_t end) {
    std::vector<T> best(static_cast<size_t>(g.c));
    std::vector<int64_t> arg(static_cast<size_t>(g.c));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t img = r / g.out_h, oh = r % g.out_h;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        argmax_window(g, x + img * image, oh, ow, best.data(), arg.data());
        T* out = ddy + ((img * g.out_h + oh) * g.out_w + ow) * g.c;
        const T* in = ddx + img * image;
        for (int64_t ch = 0; ch < g.c; ++ch) out[ch] = in[arg[ch] + ch];
      }
    }
  });
}

// AvgPoolGrad(dy): each window's dy, divided by its valid cells, added to each of them.
template <class T>
void avg_pool_grad_kernel(KernelContext& c) {
  const PoolGeometry g = avg_pool_grad_geometry(c);
  const T* dy = c.input(0).data<T>();
  T* dx = c.output(0).data<T>();
  const int64_t image = g.h * g.w * g.c, pooled = g.out_h * g.out_w * g.c;
  std::fill(dx, dx + c.output(0).size(), T(0));
  if (c.input(0).size() == 0) return;
  c.pool().parallel_for(g.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> share(static_cast<size_t>(g.c));
    for (int64_t img = begin; img < end; ++img)
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const Window win = window_at(g, oh, ow);
          const T inv = T(1) / static_cast<T>((win.h1 - win.h0) * (win.w1 - win.w0));
          const T* d = dy + img * pooled + (oh * g.out_w + ow) * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch) share[ch] = d[ch] * inv;
          T* out = dx + img * image;
          for (int64_t h = win.h0; h < win.h1; ++h)
            for (int64_t w = win.w0; w < win.w1; ++w) {
              T* cell = out + (h * g.w + w) * g.c;
              for (int64_t ch = 0; ch < g.c; ++ch) cell[ch] += share[ch];
            }
        }
  });
}

}  // namespace

void register_pooling_kernels() {
  register_kernel("MaxPool", DeviceType::CPU, float32, max_pool_kernel<float>);
  register_kernel("MaxPool", DeviceType::CPU, float64, max_pool_kernel<double>);
  register_kernel("AvgPool", DeviceType::CPU, float32, avg_pool_kernel<float>);
  register_kernel("AvgPool", DeviceType::CPU, float64, avg_pool_kernel<double>);
  register_kernel("MaxPoolGrad", DeviceType::CPU, float32, max_pool_grad_kernel<float>);
  register_kernel("MaxPoolGrad", DeviceType::CPU, float64, max_pool_grad_kernel<double>);
  register_kernel("MaxPoolGradGrad", DeviceType::CPU, float32, max_pool_grad_grad_kernel<float>);
  register_kernel("MaxPoolGradGrad", DeviceType::CPU, float64, max_pool_grad_grad_kernel<double>);
  register_kernel("AvgPoolGrad", DeviceType::CPU, float32, avg_pool_grad_kernel<float>);
  register_kernel("AvgPoolGrad", DeviceType::CPU, float64, avg_pool_grad_kernel<double>);
  register_via_float32({"MaxPool", "AvgPool", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPoolGrad"});
}

}  // namespace weft::cpu
