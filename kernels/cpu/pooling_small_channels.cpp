#include "kernels/cpu/pooling_small_channels.h"

#include <immintrin.h>

#include <cstring>
#include <limits>

#include "kernels/cpu/pool_windows.h"

namespace weft::cpu {

namespace {

#define WEFT_AVX512 __attribute__((target("avx512f")))

// The first maximum over window `win` of the channels in `lanes` (NaN sticks at the first), and,
// per lane, the offset in the image of the cell (of channel 0) that holds it.
WEFT_AVX512 inline void first_max(const PoolGeometry& g, const float* img, const Window& win, __mmask16 lanes,
                                  __m512& m, __m512i& cell) {
  const int64_t first = (win.h0 * g.w + win.w0) * g.c;
  m = _mm512_maskz_loadu_ps(lanes, img + first);
  cell = _mm512_set1_epi32(static_cast<int32_t>(first));
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = h == win.h0 ? win.w0 + 1 : win.w0; w < win.w1; ++w) {
      const int64_t at = (h * g.w + w) * g.c;
      const __m512 v = _mm512_maskz_loadu_ps(lanes, img + at);
      const __mmask16 take =
          (_mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) &
          _mm512_cmp_ps_mask(m, m, _CMP_ORD_Q);
      m = _mm512_mask_mov_ps(m, take, v);
      cell = _mm512_mask_mov_epi32(cell, take, _mm512_set1_epi32(static_cast<int32_t>(at)));
    }
}

WEFT_AVX512 void forward_rows(const PoolGeometry& g, const float* x, float* y, int64_t r0, int64_t r1) {
  const auto lanes = static_cast<__mmask16>((1u << g.c) - 1u);
  for (int64_t r = r0; r < r1; ++r) {
    const float* img = x + (r / g.out_h) * g.h * g.w * g.c;
    const Rows rows = rows_of(g, r % g.out_h);
    float* out = y + r * g.out_w * g.c;
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      __m512 m;
      __m512i cell;
      first_max(g, img, window_of(g, rows, ow), lanes, m, cell);
      _mm512_mask_storeu_ps(out + ow * g.c, lanes, m);
    }
  }
}

// dx of one image where windows do not overlap: each cell of each window written once.
WEFT_AVX512 void disjoint_windows_grad(const PoolGeometry& g, const float* img, const float* dy, float* dx,
                                       bool relu) {
  const auto lanes = static_cast<__mmask16>((1u << g.c) - 1u);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Rows rows = rows_of(g, oh);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const Window win = window_of(g, rows, ow);
      __m512 m;
      __m512i cell;
      first_max(g, img, win, lanes, m, cell);
      __m512 d = _mm512_maskz_loadu_ps(lanes, dy + (oh * g.out_w + ow) * g.c);
      // ReluGrad by x: only the maximum's cell receives dy, and there x is m (NaN included, which
      // fails the test as the cell's NaN would), so one mask per window serves every cell.
      if (relu) d = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m, zero, _CMP_GT_OQ), d);
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const int64_t at = (h * g.w + w) * g.c;
          const __mmask16 hit = _mm512_cmpeq_epi32_mask(cell, _mm512_set1_epi32(static_cast<int32_t>(at)));
          // +0 + dy, as a cleared cell adds it
          _mm512_mask_storeu_ps(dx + at, lanes, _mm512_add_ps(zero, _mm512_maskz_mov_ps(hit, d)));
        }
    }
  }
}

// dx of one image, cleared, where windows may overlap: each window's dy added at its maxima.
WEFT_AVX512 void overlapping_windows_grad(const PoolGeometry& g, const float* img, const float* dy, float* dx,
                                          bool relu) {
  const auto lanes = static_cast<__mmask16>((1u << g.c) - 1u);
  const int64_t image = g.h * g.w * g.c;
  std::memset(dx, 0, static_cast<size_t>(image) * sizeof(float));
  alignas(64) int32_t cells[16];
  alignas(64) float shares[16];
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Rows rows = rows_of(g, oh);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      __m512 m;
      __m512i cell;
      first_max(g, img, window_of(g, rows, ow), lanes, m, cell);
      _mm512_store_si512(cells, cell);
      _mm512_store_ps(shares, _mm512_maskz_loadu_ps(lanes, dy + (oh * g.out_w + ow) * g.c));
      for (int64_t k = 0; k < g.c; ++k) dx[cells[k] + k] += shares[k];
    }
  }
  if (!relu) return;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < image; i += 16) {
    const auto tail = static_cast<__mmask16>(image - i >= 16 ? 0xffffu : (1u << (image - i)) - 1u);
    const __mmask16 live = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(tail, img + i), zero, _CMP_GT_OQ);
    _mm512_mask_storeu_ps(dx + i, tail, _mm512_maskz_mov_ps(live, _mm512_maskz_loadu_ps(tail, dx + i)));
  }
}

#undef WEFT_AVX512

}  // namespace

bool small_channel_max_pool(const PoolGeometry& g) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && g.c >= 1 && g.c <= 16 && g.h * g.w * g.c <= std::numeric_limits<int32_t>::max();
}

void max_pool_rows_small_channels(const PoolGeometry& g, const float* x, float* y, int64_t r0, int64_t r1) {
  forward_rows(g, x, y, r0, r1);
}

void max_pool_grad_images_small_channels(const PoolGeometry& g, const float* x, const float* dy, float* dx,
                                         int64_t i0, int64_t i1, bool relu) {
  const int64_t image = g.h * g.w * g.c, pooled = g.out_h * g.out_w * g.c;
  const bool disjoint = g.kh <= g.sh && g.kw <= g.sw;
  // Every cell in some window: else the cells no window reads are cleared first.
  const bool covered = g.kh == g.sh && g.kw == g.sw && g.out_h * g.sh - g.pad_top >= g.h &&
                       g.out_w * g.sw - g.pad_left >= g.w;
  for (int64_t i = i0; i < i1; ++i) {
    float* out = dx + i * image;
    if (!disjoint) {
      overlapping_windows_grad(g, x + i * image, dy + i * pooled, out, relu);
      continue;
    }
    if (!covered) std::memset(out, 0, static_cast<size_t>(image) * sizeof(float));
    disjoint_windows_grad(g, x + i * image, dy + i * pooled, out, relu);
  }
}

}  // namespace weft::cpu
