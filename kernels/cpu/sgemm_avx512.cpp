// The AVX-512 micro-kernel of weft's own GEMM (sgemm_driver.h has the loops around it): an
// MR x (NV * 16) tile of C in MR * NV zmm registers.
#include <immintrin.h>

#include "kernels/cpu/sgemm_driver.h"
#include "kernels/cpu/sgemm_isa.h"

namespace weft::cpu {

namespace {

struct Avx512 {
  static constexpr int kLanes = 16;
  // Both operands of a narrow product read in place where they allow (sgemm_driver.h: direct_a,
  // direct_b): tuned on AVX-512 CPUs.
  static constexpr bool kReadAInPlace = true;
  static constexpr bool kReadBInPlace = true;

  // A is read from a packed panel (row stride 1, k stride MR) or, kDirect, straight from row-major
  // A (row stride lda, k stride 1), which saves packing the tall operand of a forward pass; then
  // `a_next`, the same columns of the next panel, is prefetched a row per step of k. Row k of the
  // B panel is at bp + k * ldb.
  template <int MR, int NV, bool kDirect>
  __attribute__((target("avx512f"))) static void tile(int64_t kc, const float* __restrict ap, int64_t lda,
                                                      const float* a_next, const float* __restrict bp, int64_t ldb,
                                                      const sgemm_detail::TileOut& out) {
    __mmask16 masks[NV];
    for (int v = 0; v < NV; ++v) {
      const int valid = std::clamp(out.cols - v * kLanes, 0, kLanes);
      masks[v] = static_cast<__mmask16>((1u << valid) - 1u);
    }
    __m512 acc[MR][NV];
#pragma GCC unroll 64
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    const int64_t row_stride = kDirect ? lda : 1;
    for (int64_t k = 0; k < kc; ++k) {
      const float* a_k = kDirect ? ap + k : ap + k * MR;
      __m512 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bp + v * kLanes);
      if (kDirect && a_next)
        _mm_prefetch(reinterpret_cast<const char*>(a_next + (k % kLanes) * lda + (k & ~int64_t{kLanes - 1})),
                     _MM_HINT_T0);
#pragma GCC unroll 64
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a_k[i * row_stride]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
      }
      bp += ldb;
    }
    __m512 bias[NV];
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bias[v] = out.bias ? _mm512_maskz_loadu_ps(masks[v], out.bias + v * kLanes) : zero;
#pragma GCC unroll 64
    for (int i = 0; i < MR; ++i) {
      if (i >= out.rows) break;
      float* row = out.c + i * out.ldc;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m512 x = acc[i][v];
        // Same operations, in the same order, as the unfused MatMul, Add and Relu kernels.
        if (out.accumulate) x = _mm512_add_ps(_mm512_maskz_loadu_ps(masks[v], row + v * kLanes), x);
        if (out.bias) x = _mm512_add_ps(x, bias[v]);
        if (out.relu) x = _mm512_maskz_max_ps(0xFFFF, zero, x);  // max(0, NaN) is NaN, max(0, -0) is -0
        if (out.relu_grad_of) {
          // x kept where the relu's input is > 0 (ordered: not where it is NaN), else +0.
          const __m512 r = _mm512_maskz_loadu_ps(masks[v], out.relu_grad_of + i * out.ldc + v * kLanes);
          x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, zero, _CMP_GT_OQ), x);
        }
        _mm512_mask_storeu_ps(row + v * kLanes, masks[v], x);
      }
    }
  }
};

}  // namespace

void sgemm_avx512(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c,
                  const SgemmEpilogue& ep) {
  if (g.n <= Avx512::kLanes) sgemm_detail::run<Avx512, 24, 1>(pool, g, a, b, c, ep);
  else sgemm_detail::run<Avx512, 14, 2>(pool, g, a, b, c, ep);
}

}  // namespace weft::cpu
