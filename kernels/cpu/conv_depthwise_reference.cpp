#include "kernels/cpu/conv_depthwise_reference.h"

#include <algorithm>
#include <vector>

namespace weft::cpu {

namespace {

// The input cell under tap `k` of output position `o` along one dimension, or -1 in the padding.
int64_t input_at(int64_t o, int64_t k, int64_t stride, int64_t dilation, int64_t pad, int64_t size) {
  const int64_t i = o * stride - pad + k * dilation;
  return i >= 0 && i < size ? i : -1;
}

// The output position whose tap `k` reads input cell `i`, or -1 where none does.
int64_t output_at(int64_t i, int64_t k, int64_t stride, int64_t dilation, int64_t pad, int64_t size) {
  const int64_t t = i + pad - k * dilation;
  return t >= 0 && t % stride == 0 && t / stride < size ? t / stride : -1;
}

// Rows of the output (or of dx) per pool task.
constexpr int64_t kRowGrain = 4;

}  // namespace

template <class T>
void depthwise_conv2d_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* filter, T* y) {
  const int64_t c = p.c, f = p.f, m = c > 0 ? f / c : 0;
  pool.parallel_for(p.n * p.oh, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t img = r / p.oh, oy = r % p.oh;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        T* out = y + (r * p.ow + ox) * f;
        std::fill(out, out + f, T(0));
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = input_at(oy, ky, p.win.stride_h, p.win.dilation_h, p.g.pad_top, p.h);
          if (iy < 0) continue;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = input_at(ox, kx, p.win.stride_w, p.win.dilation_w, p.g.pad_left, p.w);
            if (ix < 0) continue;
            const T* in = x + ((img * p.h + iy) * p.w + ix) * c;
            const T* taps = filter + (ky * p.kw + kx) * f;
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t j = 0; j < m; ++j) out[ch * m + j] += in[ch] * taps[ch * m + j];
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backprop_input_reference(ThreadPool& pool, const ConvParams& p, const T* filter, const T* dy, T* dx) {
  const int64_t c = p.c, f = p.f, m = c > 0 ? f / c : 0;
  pool.parallel_for(p.n * p.h, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t img = r / p.h, iy = r % p.h;
      for (int64_t ix = 0; ix < p.w; ++ix) {
        T* cell = dx + (r * p.w + ix) * c;
        std::fill(cell, cell + c, T(0));
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t oy = output_at(iy, ky, p.win.stride_h, p.win.dilation_h, p.g.pad_top, p.oh);
          if (oy < 0) continue;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ox = output_at(ix, kx, p.win.stride_w, p.win.dilation_w, p.g.pad_left, p.ow);
            if (ox < 0) continue;
            const T* grad = dy + ((img * p.oh + oy) * p.ow + ox) * f;
            const T* taps = filter + (ky * p.kw + kx) * f;
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t j = 0; j < m; ++j) cell[ch] += grad[ch * m + j] * taps[ch * m + j];
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backprop_filter_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* dy,
                                         T* dfilter) {
  const int64_t c = p.c, f = p.f, m = c > 0 ? f / c : 0;
  // One task per tap of the window: it sums its [C * M] filter values over every output cell.
  pool.parallel_for(p.kh * p.kw, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ky = t / p.kw, kx = t % p.kw;
      T* acc = dfilter + t * f;
      std::fill(acc, acc + f, T(0));
      for (int64_t img = 0; img < p.n; ++img)
        for (int64_t oy = 0; oy < p.oh; ++oy) {
          const int64_t iy = input_at(oy, ky, p.win.stride_h, p.win.dilation_h, p.g.pad_top, p.h);
          if (iy < 0) continue;
          for (int64_t ox = 0; ox < p.ow; ++ox) {
            const int64_t ix = input_at(ox, kx, p.win.stride_w, p.win.dilation_w, p.g.pad_left, p.w);
            if (ix < 0) continue;
            const T* in = x + ((img * p.h + iy) * p.w + ix) * c;
            const T* grad = dy + ((img * p.oh + oy) * p.ow + ox) * f;
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t j = 0; j < m; ++j) acc[ch * m + j] += in[ch] * grad[ch * m + j];
          }
        }
    }
  });
}

#define WEFT_DEPTHWISE_REFERENCE(T)                                                                          \
  template void depthwise_conv2d_reference<T>(ThreadPool&, const ConvParams&, const T*, const T*, T*);        \
  template void depthwise_backprop_input_reference<T>(ThreadPool&, const ConvParams&, const T*, const T*, T*); \
  template void depthwise_backprop_filter_reference<T>(ThreadPool&, const ConvParams&, const T*, const T*, T*);
WEFT_DEPTHWISE_REFERENCE(float)
WEFT_DEPTHWISE_REFERENCE(double)
#undef WEFT_DEPTHWISE_REFERENCE

}  // namespace weft::cpu
