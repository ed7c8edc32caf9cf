// One GEMM, C = op(A) op(B), row-major. Narrow float products (the layers of an MLP, forward and
// backward; use_own_sgemm) go to weft's own AVX-512 GEMM (sgemm.h) where the CPU has it: 20-35%
// faster than OpenBLAS there on the 2-core reference machine; other float products too where it
// measures clearly faster on this CPU (sgemm_choice.h). Everything else goes through CBLAS; tall
// and narrow products (many rows of A, a B that fits in cache) are then split by rows over the
// pool with OpenBLAS single-threaded inside each slice, which measured 15-30% faster than
// OpenBLAS's own threading for such shapes.
//
//   gemm_rows<float>(pool, g, a, b, c, [&](int64_t r0, int64_t r1) { epilogue(r0, r1); });
//
// The optional `epilogue(r0, r1)` runs on rows [r0, r1) of C right after they are computed, while
// they are still in cache (bias and activation of a fused matmul).
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/sgemm_choice.h"
#include "runtime/device.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

// Weft's own GEMM wins on narrow products with enough rows on every AVX-512 CPU measured. Other
// products with enough rows and columns go to it where it measured clearly faster on this CPU
// (sgemm_choice.h); OpenBLAS keeps the tiny ones, where its small-matrix kernels are better
// (fewer than 32 columns: a 16-wide tile is mostly padding; a 60 x 10 x 784 product measured 2x
// slower, and products of 32 rows about 1.5x slower).
constexpr int64_t kOwnSgemmMaxCols = 128;

inline bool use_own_sgemm(const GemmArgs& g) {
  if (g.k <= 0 || !sgemm_available()) return false;
  switch (sgemm_choice()) {
    case SgemmChoice::kOwn: return true;
    case SgemmChoice::kBlas: return false;
    case SgemmChoice::kAuto: break;
  }
  if (!sgemm_has_avx512()) {
    // The AVX2 variant reaches about 90% of OpenBLAS's kernels on general shapes; it wins where it
    // reads a tall A in place and writes C once: very narrow products (2x at 60000x128 by 128x10),
    // and narrow ones with a short inner dimension (10% at 60000x128 by 128x128).
    return g.m >= 1024 && (g.n <= 16 || (g.n <= kOwnSgemmMaxCols && g.k <= 128));
  }
  const bool narrow = g.n <= kOwnSgemmMaxCols && (g.m >= 1024 || (g.n >= 32 && g.m >= 64));
  return narrow || (g.m >= 48 && g.n >= 32 && own_sgemm_wins_general_shapes());
}

template <class T>
void blas_gemm(const GemmArgs& g, const T* a, const T* b, T* c) {
  const auto ta = g.ta ? CblasTrans : CblasNoTrans;
  const auto tb = g.tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0f, a, g.lda, b, g.ldb, 0.0f, c, g.ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0, a, g.lda, b, g.ldb, 0.0, c, g.ldc);
  }
}

// True when splitting by rows beats OpenBLAS's threading: enough rows for every thread, A not
// transposed (its rows are contiguous), and B small enough to stay in each core's cache.
inline bool split_by_rows(const GemmArgs& g, int threads, size_t elem) {
  return threads > 1 && !g.ta && g.m >= int64_t{512} * threads && static_cast<size_t>(g.k * g.n) * elem <= (size_t{2} << 20);
}

template <class T, class Epilogue>
void gemm_rows(ThreadPool& pool, const GemmArgs& g, const T* a, const T* b, T* c, Epilogue&& epilogue) {
  if constexpr (std::is_same_v<T, float>) {
    if (use_own_sgemm(g)) {
      sgemm(pool, g, a, b, c);
      epilogue(int64_t{0}, g.m);
      return;
    }
  }
  if (!split_by_rows(g, pool.num_threads(), sizeof(T))) {
    blas_gemm<T>(g, a, b, c);
    epilogue(int64_t{0}, g.m);
    return;
  }
  // OpenBLAS's thread count is process-wide: while the slices run, each runs single-threaded.
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  const int64_t slices = pool.num_threads();
  pool.parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t r0 = g.m * s / slices, r1 = g.m * (s + 1) / slices;
      GemmArgs part = g;
      part.m = r1 - r0;
      blas_gemm<T>(part, a + r0 * g.lda, b, c + r0 * g.ldc);
      epilogue(r0, r1);
    }
  });
  openblas_set_num_threads(blas_threads);
}

template <class T>
void gemm_rows(ThreadPool& pool, const GemmArgs& g, const T* a, const T* b, T* c) {
  gemm_rows<T>(pool, g, a, b, c, [](int64_t, int64_t) {});
}

}  // namespace weft::cpu
