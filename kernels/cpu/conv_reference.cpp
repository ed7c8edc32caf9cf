#include "kernels/cpu/conv_reference.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv_depthwise_reference.h"
#include "kernels/cpu/gemm.h"

namespace weft::cpu {

namespace {

// The im2col matrix of a chunk of images is kept under this many bytes (at least one image's):
// big enough that each GEMM is efficient, small enough not to double a large batch's memory.
constexpr int64_t kColBytes = int64_t{32} << 20;
// Rows of the im2col matrix per pool task: a row is kh * kw * c copies.
constexpr int64_t kRowGrain = 64;

int64_t images_per_chunk(const ConvParams& p, size_t elem) {
  const int64_t per_image = std::max<int64_t>(p.oh * p.ow * p.kh * p.kw * p.c * static_cast<int64_t>(elem), 1);
  return std::clamp<int64_t>(kColBytes / per_image, 1, std::max<int64_t>(p.n, 1));
}

// Rows [r0, r1) of the im2col matrix of the images starting at `x`: row (img, oy, ox) holds the
// window under that output cell, in the filter's [kh, kw, c] order, zeros where it hangs over
// the padding.
template <class T>
void im2col(const ConvParams& p, const T* x, T* col, int64_t r0, int64_t r1) {
  const int64_t k = p.kh * p.kw * p.c, cells = p.oh * p.ow;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t img = r / cells, oy = r % cells / p.ow, ox = r % p.ow;
    const T* image = x + img * p.h * p.w * p.c;
    T* dst = col + r * k;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.win.stride_h - p.g.pad_top + ky * p.win.dilation_h;
      for (int64_t kx = 0; kx < p.kw; ++kx, dst += p.c) {
        const int64_t ix = ox * p.win.stride_w - p.g.pad_left + kx * p.win.dilation_w;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) std::fill(dst, dst + p.c, T(0));
        else std::memcpy(dst, image + (iy * p.w + ix) * p.c, static_cast<size_t>(p.c) * sizeof(T));
      }
    }
  }
}

// The inverse of im2col for a gradient: input cell (img, iy, ix) gathers every column entry
// that im2col copied from it, in a fixed order (ky, kx ascending), so the sum's bits do not
// depend on threads. Rows are (img, iy) pairs.
template <class T>
void col2im(const ConvParams& p, const T* col, T* dx, int64_t r0, int64_t r1) {
  const int64_t k = p.kh * p.kw * p.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t img = r / p.h, iy = r % p.h;
    T* out_row = dx + (img * p.h + iy) * p.w * p.c;
    std::fill(out_row, out_row + p.w * p.c, T(0));
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = iy + p.g.pad_top - ky * p.win.dilation_h;
      if (ty < 0 || ty % p.win.stride_h != 0 || ty / p.win.stride_h >= p.oh) continue;
      const int64_t oy = ty / p.win.stride_h;
      for (int64_t ix = 0; ix < p.w; ++ix) {
        T* cell = out_row + ix * p.c;
        for (int64_t kx = 0; kx < p.kw; ++kx) {
          const int64_t tx = ix + p.g.pad_left - kx * p.win.dilation_w;
          if (tx < 0 || tx % p.win.stride_w != 0 || tx / p.win.stride_w >= p.ow) continue;
          const int64_t ox = tx / p.win.stride_w;
          const T* src = col + ((img * p.oh + oy) * p.ow + ox) * k + (ky * p.kw + kx) * p.c;
          for (int64_t ch = 0; ch < p.c; ++ch) cell[ch] += src[ch];
        }
      }
    }
  }
}

template <class T>
void fill_im2col(ThreadPool& pool, const ConvParams& p, const T* x, T* col, int64_t rows) {
  pool.parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) { im2col(p, x, col, r0, r1); });
}

}  // namespace

template <class T>
void conv2d_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* filter, T* y) {
  if (p.groups > 1) return depthwise_conv2d_reference(pool, p, x, filter, y);
  const int64_t k = p.kh * p.kw * p.c, cells = p.oh * p.ow;
  if (p.n * cells * p.f == 0) return;
  if (k == 0) {
    std::fill(y, y + p.n * cells * p.f, T(0));
    return;
  }
  const int64_t chunk = images_per_chunk(p, sizeof(T));
  std::vector<T> col(static_cast<size_t>(std::min(chunk, p.n) * cells * k));
  for (int64_t first = 0; first < p.n; first += chunk) {
    const int64_t rows = std::min(chunk, p.n - first) * cells;
    fill_im2col(pool, p, x + first * p.h * p.w * p.c, col.data(), rows);
    const GemmArgs g{.m = rows, .n = p.f, .k = k, .ta = false, .tb = false, .lda = k, .ldb = p.f, .ldc = p.f};
    gemm_rows<T>(pool, g, col.data(), filter, y + first * cells * p.f);
  }
}

template <class T>
void conv2d_backprop_input_reference(ThreadPool& pool, const ConvParams& p, const T* filter, const T* dy, T* dx) {
  if (p.groups > 1) return depthwise_backprop_input_reference(pool, p, filter, dy, dx);
  const int64_t k = p.kh * p.kw * p.c, cells = p.oh * p.ow;
  const int64_t total = p.n * p.h * p.w * p.c;
  if (total == 0) return;
  if (k == 0 || p.f == 0 || cells == 0) {
    std::fill(dx, dx + total, T(0));
    return;
  }
  const int64_t chunk = images_per_chunk(p, sizeof(T));
  std::vector<T> col(static_cast<size_t>(std::min(chunk, p.n) * cells * k));
  for (int64_t first = 0; first < p.n; first += chunk) {
    const int64_t images = std::min(chunk, p.n - first);
    // The column matrix of dx: dy's rows times the filter transposed ([c-window, f] stored).
    const GemmArgs g{.m = images * cells, .n = k, .k = p.f, .ta = false, .tb = true, .lda = p.f, .ldb = p.f, .ldc = k};
    gemm_rows<T>(pool, g, dy + first * cells * p.f, filter, col.data());
    T* out = dx + first * p.h * p.w * p.c;
    pool.parallel_for(images * p.h, 1, [&](int64_t r0, int64_t r1) { col2im(p, col.data(), out, r0, r1); });
  }
}

template <class T>
void conv2d_backprop_filter_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* dy, T* dfilter) {
  if (p.groups > 1) return depthwise_backprop_filter_reference(pool, p, x, dy, dfilter);
  const int64_t k = p.kh * p.kw * p.c, cells = p.oh * p.ow;
  if (k * p.f == 0) return;
  if (p.n * cells == 0) {
    std::fill(dfilter, dfilter + k * p.f, T(0));
    return;
  }
  const int64_t chunk = images_per_chunk(p, sizeof(T));
  std::vector<T> col(static_cast<size_t>(std::min(chunk, p.n) * cells * k));
  std::vector<T> part;  // a later chunk's product, added to the first's in chunk order
  for (int64_t first = 0; first < p.n; first += chunk) {
    const int64_t rows = std::min(chunk, p.n - first) * cells;
    fill_im2col(pool, p, x + first * p.h * p.w * p.c, col.data(), rows);
    // dfilter [k, f] = col^T dy: the sum over every output cell of the chunk.
    const GemmArgs g{.m = k, .n = p.f, .k = rows, .ta = true, .tb = false, .lda = k, .ldb = p.f, .ldc = p.f};
    const T* dy_rows = dy + first * cells * p.f;
    if (first == 0) {
      gemm_rows<T>(pool, g, col.data(), dy_rows, dfilter);
      continue;
    }
    part.resize(static_cast<size_t>(k * p.f));
    gemm_rows<T>(pool, g, col.data(), dy_rows, part.data());
    for (int64_t i = 0; i < k * p.f; ++i) dfilter[i] += part[static_cast<size_t>(i)];
  }
}

template void conv2d_reference<float>(ThreadPool&, const ConvParams&, const float*, const float*, float*);
template void conv2d_reference<double>(ThreadPool&, const ConvParams&, const double*, const double*, double*);
template void conv2d_backprop_input_reference<float>(ThreadPool&, const ConvParams&, const float*, const float*,
                                                     float*);
template void conv2d_backprop_input_reference<double>(ThreadPool&, const ConvParams&, const double*, const double*,
                                                      double*);
template void conv2d_backprop_filter_reference<float>(ThreadPool&, const ConvParams&, const float*, const float*,
                                                      float*);
template void conv2d_backprop_filter_reference<double>(ThreadPool&, const ConvParams&, const double*, const double*,
                                                       double*);

}  // namespace weft::cpu
