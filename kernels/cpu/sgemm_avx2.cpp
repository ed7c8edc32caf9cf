// The AVX2 + FMA micro-kernel of weft's own GEMM (sgemm_driver.h has the loops around it): an
// MR x (NV * 8) tile of C in MR * NV of the 16 ymm registers, beside NV vectors of B and one
// broadcast of A (6 x 16: 12 accumulators, as BLIS's Haswell kernel).
#include <immintrin.h>

#include "kernels/cpu/sgemm_driver.h"
#include "kernels/cpu/sgemm_isa.h"

namespace weft::cpu {

namespace {

struct Avx2 {
  static constexpr int kLanes = 8;
  // Measured single-threaded against OpenBLAS 0.3.21 on a Zen 2 (AVX2) VM: reading a tall A in
  // place doubles the speed of very narrow products (60000x128 by 128x10: 48 against 23 GFLOP/s);
  // reading B in place costs 10% on 60000x784 by 784x128, so B is always packed.
  static constexpr bool kReadAInPlace = true;
  static constexpr bool kReadBInPlace = false;

  // As Avx512::tile (sgemm_avx512.cpp): A packed or read in place (kDirect, with the next panel
  // prefetched), row k of the B panel at bp + k * ldb, epilogue on the registers.
  template <int MR, int NV, bool kDirect>
  __attribute__((target("avx2,fma"))) static void tile(int64_t kc, const float* __restrict ap, int64_t lda,
                                                       const float* a_next, const float* __restrict bp, int64_t ldb,
                                                       const sgemm_detail::TileOut& out) {
    // C is read (earlier K blocks) and written at the end: fetch its rows while the loop runs.
#pragma GCC unroll 64
    for (int i = 0; i < MR; ++i) {
      if (i >= out.rows) break;
      _mm_prefetch(reinterpret_cast<const char*>(out.c + i * out.ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(out.c + i * out.ldc + NV * kLanes - 1), _MM_HINT_T0);
    }
    __m256 acc[MR][NV];
#pragma GCC unroll 64
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
    const int64_t row_stride = kDirect ? lda : 1;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) {
      const float* a_k = kDirect ? ap + k : ap + k * MR;
      __m256 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(bp + v * kLanes);
      if (kDirect && a_next)
        _mm_prefetch(reinterpret_cast<const char*>(a_next + (k % 16) * lda + (k & ~int64_t{15})), _MM_HINT_T0);
#pragma GCC unroll 64
      for (int i = 0; i < MR; ++i) {
        const __m256 av = _mm256_broadcast_ss(a_k + i * row_stride);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
      }
      bp += ldb;
    }
    // The masks are made after the loop: all 16 registers are busy inside it.
    const bool full = out.cols == NV * kLanes;
    __m256i masks[NV];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) masks[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(out.cols - v * kLanes), lane);
    const __m256 zero = _mm256_setzero_ps();
    __m256 bias[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bias[v] = out.bias ? _mm256_maskload_ps(out.bias + v * kLanes, masks[v]) : zero;
#pragma GCC unroll 64
    for (int i = 0; i < MR; ++i) {
      if (i >= out.rows) break;
      float* row = out.c + i * out.ldc;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m256 x = acc[i][v];
        // Same operations, in the same order, as the unfused MatMul, Add and Relu kernels.
        if (out.accumulate)
          x = _mm256_add_ps(full ? _mm256_loadu_ps(row + v * kLanes) : _mm256_maskload_ps(row + v * kLanes, masks[v]), x);
        if (out.bias) x = _mm256_add_ps(x, bias[v]);
        if (out.relu) x = _mm256_max_ps(zero, x);  // the second operand on NaN or equal zeros: NaN, -0 pass
        if (out.relu_grad_of) {
          // x kept where the relu's input is > 0 (ordered: not where it is NaN), else +0.
          const float* r = out.relu_grad_of + i * out.ldc + v * kLanes;
          const __m256 rv = full ? _mm256_loadu_ps(r) : _mm256_maskload_ps(r, masks[v]);
          x = _mm256_and_ps(x, _mm256_cmp_ps(rv, zero, _CMP_GT_OQ));
        }
        if (full) _mm256_storeu_ps(row + v * kLanes, x);
        else _mm256_maskstore_ps(row + v * kLanes, masks[v], x);
      }
    }
  }
};

}  // namespace

void sgemm_avx2(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c,
                const SgemmEpilogue& ep) {
  if (g.n <= Avx2::kLanes) sgemm_detail::run<Avx2, 12, 1>(pool, g, a, b, c, ep);
  else sgemm_detail::run<Avx2, 6, 2>(pool, g, a, b, c, ep);
}

}  // namespace weft::cpu
