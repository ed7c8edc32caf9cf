// One GEMM, C = op(A) op(B), row-major. Float products go to weft's own GEMM (sgemm.h)
// where sgemm_choice.h's rule gives them to it; everything else goes through CBLAS.
//
// OpenBLAS runs single-threaded: its thread count is set to 1 once per process (when the kernels
// are registered, or at the first product) and never changed per call, because the setting is
// process-wide and concurrent products (the parallel executor, user threads) would race on it.
// It also decides bits: threaded, OpenBLAS blocks the products differently (a 256 x 512 x 512
// product rounds differently on 1 and 2 threads). weft's pool threads the CBLAS products instead:
// C is cut into a grid of tiles, one CBLAS call per tile. Splitting by rows this way measured
// 15-30% faster than OpenBLAS's own threading for tall products (and level with it on seed 004's
// large ones), and keeps a single set of busy threads on the cores. Tiles depend on the shape and
// the pool's thread count only, never on load or timing, so the bits of a product do too; and
// they are the same with or without an epilogue, so the product inside a fused matmul
// (FusedMatMul) has the bits of the unfused MatMul.
//
//   gemm_rows<float>(pool, g, a, b, c, [&](int64_t r0, int64_t r1) { epilogue(r0, r1); });
//
// The optional `epilogue(r0, r1)` runs on rows [r0, r1) of C once they are complete: on each tile
// right after it is computed, where tiles are whole rows (bias and activation of a fused matmul).
// It may run on several threads at once, for disjoint rows.
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

inline bool use_own_sgemm(const GemmArgs& g) {
  if (g.k <= 0 || !sgemm_available()) return false;
  switch (sgemm_choice()) {
    case SgemmChoice::kOwn: return true;
    case SgemmChoice::kBlas: return false;
    case SgemmChoice::kAuto: break;
  }
  return own_sgemm_for(host_cpu_features(), g);
}

// Sets OpenBLAS to one thread, the first time only.
inline void use_single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

template <class T>
void blas_gemm(const GemmArgs& g, const T* a, const T* b, T* c) {
  const auto ta = g.ta ? CblasTrans : CblasNoTrans;
  const auto tb = g.tb ? CblasTrans : CblasNoTrans;
  use_single_threaded_blas();
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0f, a, g.lda, b, g.ldb, 0.0f, c, g.ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0, a, g.lda, b, g.ldb, 0.0, c, g.ldc);
  }
}

// The grid of tiles of C for one CBLAS product: rows cut `rows` ways, columns `cols` ways.
struct GemmTiling {
  int64_t rows = 1, cols = 1;
};

// Multiply-adds per tile below which splitting is not worth a hand-over to another thread (25-50
// us on one core, about what waking a sleeping worker costs on the VMs weft is measured on, and
// a shared machine's busy cores make it more): the layers of seed 004's shallow Keras model, up
// to 1M multiply-adds, stay on the calling thread. Tile edges fall on multiples of the
// alignments, which the CBLAS micro-kernels cover.
constexpr int64_t kMinTileWork = int64_t{1} << 19;
constexpr int64_t kTileRowAlign = 8;
constexpr int64_t kTileColAlign = 16;

// As many tiles as threads where the work allows, the grid that packs least: each tile packs its
// rows of A and its columns of B, so the cost goes with rows/p + cols/q. Rows win ties (A's rows
// are contiguous, and an epilogue can run right after its tile).
inline GemmTiling gemm_tiling(const GemmArgs& g, int threads) {
  const int64_t work = g.m * g.n * g.k;
  for (int64_t tiles = std::min<int64_t>(threads, work / kMinTileWork); tiles > 1; --tiles) {
    GemmTiling best;
    double best_cost = 0;
    for (int64_t q = 1; q <= tiles; ++q) {
      if (tiles % q != 0) continue;
      const int64_t p = tiles / q;
      if ((p > 1 && p > g.m / kTileRowAlign) || (q > 1 && q > g.n / kTileColAlign)) continue;
      const double cost = static_cast<double>(g.m) / static_cast<double>(p) + static_cast<double>(g.n) / static_cast<double>(q);
      if (best.rows * best.cols == 1 || cost < best_cost) {
        best = {p, q};
        best_cost = cost;
      }
    }
    if (best.rows * best.cols > 1) return best;
  }
  return {};
}

// Where tile i of `parts` starts along a dimension of `len`, on a multiple of `align`; strictly
// increasing in i when parts <= len / align.
inline int64_t tile_edge(int64_t i, int64_t parts, int64_t len, int64_t align) {
  return i == parts ? len : len * i / parts / align * align;
}


// The epilogue of products that have none.
struct NoEpilogue {
  void operator()(int64_t, int64_t) const {}
};

// Requires g.k > 0 (CBLAS wants leading dimensions of at least 1; the callers fill C with zeros).
template <class T, class Epilogue>
void gemm_rows(ThreadPool& pool, const GemmArgs& g, const T* a, const T* b, T* c, Epilogue&& epilogue) {
  constexpr bool kHasEpilogue = !std::is_same_v<std::decay_t<Epilogue>, NoEpilogue>;
  if constexpr (std::is_same_v<T, float>) {
    if (use_own_sgemm(g)) {
      sgemm(pool, g, a, b, c);
      epilogue(int64_t{0}, g.m);
      return;
    }
  }
  const GemmTiling t = gemm_tiling(g, pool.num_threads());
  // One CBLAS call per tile: OpenBLAS packs B once per call, so cutting a tile into bands of rows
  // (as this did, 1024 rows or more, to run the epilogue on rows still in cache) packed it once
  // per band: seed 004's 1680x2000 by 2000x3000 took 64 ms in bands and 60 in whole tiles on 2
  // cores, level with OpenBLAS's own threading. The bands must be the same with and without an
  // epilogue (OpenBLAS's bits can depend on where the rows are cut), and the epilogue's pass
  // over a tile's rows costs little beside the product.
  auto tile = [&](int64_t i) {
    const int64_t pi = i / t.cols, qi = i % t.cols;
    const int64_t r0 = tile_edge(pi, t.rows, g.m, kTileRowAlign), r1 = tile_edge(pi + 1, t.rows, g.m, kTileRowAlign);
    const int64_t c0 = tile_edge(qi, t.cols, g.n, kTileColAlign), c1 = tile_edge(qi + 1, t.cols, g.n, kTileColAlign);
    GemmArgs part = g;
    part.m = r1 - r0;
    part.n = c1 - c0;
    blas_gemm<T>(part, g.ta ? a + r0 : a + r0 * g.lda, g.tb ? b + c0 * g.ldb : b + c0, c + r0 * g.ldc + c0);
    if (t.cols == 1) epilogue(r0, r1);
  };
  if (t.rows * t.cols == 1) {
    tile(0);
    return;
  }
  pool.parallel_for(t.rows * t.cols, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0; i < t1; ++i) tile(i);
  });
  if constexpr (kHasEpilogue) {
    if (t.cols > 1) {
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(g.n, 1));
      pool.parallel_for(g.m, grain, [&](int64_t r0, int64_t r1) { epilogue(r0, r1); });
    }
  }
}

template <class T>
void gemm_rows(ThreadPool& pool, const GemmArgs& g, const T* a, const T* b, T* c) {
  gemm_rows<T>(pool, g, a, b, c, NoEpilogue{});
}

}  // namespace weft::cpu
