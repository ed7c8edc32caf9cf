// CPU kernels of the pooling ops (kernels/defs/pooling.cpp), NHWC.
//
// oneDNN would be the library of choice for float32 pooling; the kernels are weft's own loops:
// channels are innermost and contiguous, so a window cell is a unit-stride run of C values. Max
// pooling walks each window whole, a vector of channels at a time with its running max and argmax
// in registers (max_row); average pooling walks each window cell over a row's windows, its sums in
// an array of [out_w, C]. The forward ops and MaxPoolGradGrad write each output row [out_w, C]
// once and run in parallel over (image, output row). The two gradients scatter into overlapping
// input cells, so they run in parallel over images only, each image's dx owned by one task (no
// atomics, and the sums' order does not depend on the thread count). On AVX-512, float32 max
// pooling of at most 16 channels takes pooling_small_channels.h's loops instead (same bits).
//
// Max pooling takes the first maximum in window order (row by row, left to right), NaN-sticky as
// Max does (a NaN wins and stays); its gradient goes to that same cell, as TensorFlow's does.
// SAME average pooling divides by the number of cells inside the input, not by the window's size.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/activation_attr.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/cpu/pool_windows.h"
#include "kernels/cpu/pooling_small_channels.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/pooling_kernel_geometry.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

// Every kernel walks one output row (image, oh) at a time, window cell by window cell in window
// order (row by row, left to right): for cell (h, j), the output columns whose window holds input
// column ow*sw - pad_left + j are one range, so the inner loops run over [ow, C] with no
// per-pixel bookkeeping. (Walking pixel by pixel, a window's geometry and its running state were
// set up per output pixel, which cost more than the comparisons for a network's few channels.)

// The output columns [lo, hi) whose window holds input column ow*sw - pad_left + j.
struct Columns {
  int64_t lo, hi;
};
inline Columns columns_reading(const PoolGeometry& g, int64_t j) {
  const int64_t first = g.pad_left - j;         // ow*sw >= first
  const int64_t last = g.w - 1 + g.pad_left - j;  // ow*sw <= last
  const int64_t hi = last < 0 ? 0 : std::min(g.out_w, last / g.sw + 1);
  const int64_t lo = first <= 0 ? 0 : (first + g.sw - 1) / g.sw;
  return {std::min(lo, hi), hi};
}

// The number of input columns output column ow's window covers.
inline int64_t valid_columns(const PoolGeometry& g, int64_t ow) {
  const int64_t ws = ow * g.sw - g.pad_left;
  return std::min(ws + g.kw, g.w) - std::max<int64_t>(ws, 0);
}

// Calls visit(offset of input cell (h, ow*sw - pad_left + j) in the image, ow) for every cell of
// every window of output row oh, in window order per output.
template <class Visit>
inline void for_each_cell(const PoolGeometry& g, int64_t oh, Visit visit) {
  const Rows r = rows_of(g, oh);
  const int64_t width = g.w, channels = g.c, sw = g.sw, pad_left = g.pad_left;
  for (int64_t h = r.h0; h < r.h1; ++h)
    for (int64_t j = 0; j < g.kw; ++j) {
      const Columns cols = columns_reading(g, j);
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) visit((h * width + ow * sw - pad_left + j) * channels, ow);
    }
}

// Rows of output (image, output row) per task: about kCheapGrain window cells of work each.
int64_t row_grain(const PoolGeometry& g) {
  const int64_t per_row = std::max<int64_t>(1, g.out_w * g.c * g.kh * g.kw);
  return std::max<int64_t>(1, kCheapGrain / per_row);
}

// A cell's offset in its image, as a lane of the vector loops: as wide as T, so that a comparison's
// mask selects it lane for lane.
template <class T>
using CellOffset = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

// The first maximum of window `win` over the channels [ch, ch + kVecLen<T>) (NaN sticks at the
// first), and the offset in the image of the cell (of channel 0) that holds it.
template <class T>
inline void window_max(const PoolGeometry& g, const T* __restrict img, const Window& win, int64_t ch, Vec<T>& m,
                       Vec<CellOffset<T>>& cell) {
  const int64_t first = (win.h0 * g.w + win.w0) * g.c;
  m = load_vec(img + first + ch);
  cell = Vec<CellOffset<T>>{} + static_cast<CellOffset<T>>(first);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = h == win.h0 ? win.w0 + 1 : win.w0; w < win.w1; ++w) {
      const int64_t at = (h * g.w + w) * g.c;
      const Vec<T> v = load_vec(img + at + ch);
      const auto take = ((v > m) | (v != v)) & (m == m);
      m = take ? v : m;
      cell = take ? Vec<CellOffset<T>>{} + static_cast<CellOffset<T>>(at) : cell;
    }
}

// The same for one channel, where there are fewer channels than lanes or offsets outgrow them.
template <class T>
inline void window_max(const PoolGeometry& g, const T* __restrict img, const Window& win, int64_t ch, T& m,
                       int64_t& cell) {
  cell = (win.h0 * g.w + win.w0) * g.c;
  m = img[cell + ch];
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = h == win.h0 ? win.w0 + 1 : win.w0; w < win.w1; ++w) {
      const int64_t at = (h * g.w + w) * g.c;
      const bool take = takes_max(img[at + ch], m) & (m == m);
      m = take ? img[at + ch] : m;
      cell = take ? at : cell;
    }
}

// For output row oh of image `img`: each window's first maximum per channel into best [out_w, C]
// and, kWithArg, its cell's offset into the image (of channel 0) into arg [out_w, C].
//
// A window is walked whole, a vector of channels at a time, with its running maxima and cells in
// registers: a network's few channels (LeNet's 6) fill one vector, and the last vector of a row of
// channels overlaps the one before (the first maximum of a lane does not depend on its
// neighbours). Walking window cell by window cell over all of a row's windows, with the running
// state in memory, was 4x slower for 6 channels.
template <class T, bool kWithArg>
void max_row(const PoolGeometry& g, const T* img, int64_t oh, T* best, int64_t* arg) {
  constexpr int64_t L = kVecLen<T>;
  const int64_t channels = g.c;
  const Rows rows = rows_of(g, oh);
  const bool vectors = channels >= L && g.h * g.w * channels <= std::numeric_limits<CellOffset<T>>::max();
  for (int64_t ow = 0; ow < g.out_w; ++ow) {
    const Window win = window_of(g, rows, ow);
    T* b = best + ow * channels;
    [[maybe_unused]] int64_t* a = kWithArg ? arg + ow * channels : nullptr;
    if (!vectors) {
      for (int64_t ch = 0; ch < channels; ++ch) {
        int64_t cell;
        window_max(g, img, win, ch, b[ch], cell);
        if constexpr (kWithArg) a[ch] = cell;
      }
      continue;
    }
    for (int64_t ch = 0; ch < channels; ch += L) {
      const int64_t at = std::min(ch, channels - L);
      Vec<T> m;
      Vec<CellOffset<T>> cell;
      window_max(g, img, win, at, m, cell);
      std::memcpy(b + at, &m, sizeof m);
      if constexpr (kWithArg)
        for (int64_t k = 0; k < L; ++k) a[at + k] = cell[k];
    }
  }
}

template <class T>
void max_pool_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  T* y = c.output(0).data<T>();
  if (c.output(0).size() == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (small_channel_max_pool(g)) {
      c.pool().parallel_for(g.n * g.out_h, row_grain(g), [&](int64_t begin, int64_t end) {
        max_pool_rows_small_channels(g, x, y, begin, end);
      });
      return;
    }
  }
  c.pool().parallel_for(g.n * g.out_h, row_grain(g), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      max_row<T, false>(g, x + (r / g.out_h) * g.h * g.w * g.c, r % g.out_h, y + r * g.out_w * g.c, nullptr);
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
      const int64_t oh = r % g.out_h;
      const T* in = x + (r / g.out_h) * g.h * g.w * g.c;
      T* out = y + r * g.out_w * g.c;
      std::fill(out, out + g.out_w * g.c, T(0));
      for_each_cell(g, oh, [&](int64_t at, int64_t ow) {
        T* o = out + ow * g.c;
        for (int64_t ch = 0; ch < g.c; ++ch) o[ch] += in[at + ch];
      });
      const Rows rows = rows_of(g, oh);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const T inv = T(1) / static_cast<T>((rows.h1 - rows.h0) * valid_columns(g, ow));  // the valid cells only
        for (int64_t ch = 0; ch < g.c; ++ch) out[ow * g.c + ch] *= inv;
      }
    }
  });
}

// MaxPoolGrad(x, y, dy): each window's dy added to its first maximum. Each task owns whole
// images of dx (windows may overlap), which it clears and fills. With activation "relu" (x a
// relu's output), each image's dx is then ReluGrad(dx, x), while it is still in cache.
template <class T>
void max_pool_grad_kernel(KernelContext& c) {
  const PoolGeometry g = pool_kernel_geometry(c, c.input(0).shape().to_vector());
  const T* x = c.input(0).data<T>();
  const T* dy = c.input(2).data<T>();
  T* dx = c.output(0).data<T>();
  const int64_t image = g.h * g.w * g.c, pooled = g.out_h * g.out_w * g.c;
  const bool relu = relu_activation(c.attrs);
  if (c.input(2).size() == 0) {
    std::fill(dx, dx + c.output(0).size(), T(0));
    return;
  }
  const int64_t image_grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(1, image));
  if constexpr (std::is_same_v<T, float>) {
    if (small_channel_max_pool(g)) {
      c.pool().parallel_for(g.n, image_grain, [&](int64_t begin, int64_t end) {
        max_pool_grad_images_small_channels(g, x, dy, dx, begin, end, relu);
      });
      return;
    }
  }
  // Each task clears and fills the images it owns.
  c.pool().parallel_for(g.n, image_grain, [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * image, dx + end * image, T(0));
    std::vector<T> best(static_cast<size_t>(g.out_w * g.c));
    std::vector<int64_t> arg(best.size());
    for (int64_t img = begin; img < end; ++img) {
      T* out = dx + img * image;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        max_row<T, true>(g, x + img * image, oh, best.data(), arg.data());
        const T* d = dy + img * pooled + oh * g.out_w * g.c;
        for (int64_t ow = 0; ow < g.out_w; ++ow)
          for (int64_t ch = 0; ch < g.c; ++ch) out[arg[ow * g.c + ch] + ch] += d[ow * g.c + ch];
      }
      if (relu)
        for (int64_t i = 0; i < image; ++i) out[i] = relu_grad_masked(out[i], x[img * image + i]);
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
    std::vector<T> best(static_cast<size_t>(g.out_w * g.c));
    std::vector<int64_t> arg(best.size());
    for (int64_t r = begin; r < end; ++r) {
      const int64_t img = r / g.out_h;
      max_row<T, true>(g, x + img * image, r % g.out_h, best.data(), arg.data());
      T* out = ddy + r * g.out_w * g.c;
      const T* in = ddx + img * image;
      for (int64_t ow = 0; ow < g.out_w; ++ow)
        for (int64_t ch = 0; ch < g.c; ++ch) out[ow * g.c + ch] = in[arg[ow * g.c + ch] + ch];
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
    std::vector<T> share(static_cast<size_t>(g.out_w * g.c));
    for (int64_t img = begin; img < end; ++img)
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const Rows rows = rows_of(g, oh);
        const T* d = dy + img * pooled + oh * g.out_w * g.c;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const T inv = T(1) / static_cast<T>((rows.h1 - rows.h0) * valid_columns(g, ow));
          for (int64_t ch = 0; ch < g.c; ++ch) share[ow * g.c + ch] = d[ow * g.c + ch] * inv;
        }
        T* out = dx + img * image;
        for_each_cell(g, oh, [&](int64_t at, int64_t ow) {
          const T* s = share.data() + ow * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch) out[at + ch] += s[ch];
        });
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
