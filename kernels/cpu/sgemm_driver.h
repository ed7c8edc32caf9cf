// The blocking of weft's own float GEMM (sgemm.h), shared by its instruction-set variants
// (sgemm_avx2.cpp, sgemm_avx512.cpp), which supply only the micro-kernel.
//
// The loops are those of BLIS/Goto: B in panels of NR columns, split over K in blocks of at most
// kKcMax; per thread, A a block of rows at a time in panels of MR rows; the micro-kernel computes
// an MR x NR tile of C in registers, reading one broadcast of A and NR / lanes vectors of B per
// step of k. Where the operands allow (direct_a, direct_b) panels are read in place instead of
// packed: for the narrow products of an MLP, packing would cost 10-25% of the time. The tile's
// epilogue (accumulate the earlier K blocks, add bias, relu) runs on the registers before the
// single store.
//
// Every element of C is one chain of fused multiply-adds over k, in increasing k, restarted per K
// block and added to the previous blocks in order: the vector width, the tile shape and the thread
// count do not change the order, so every variant gives the same bits.
//
// A Kernel policy provides `static constexpr int kLanes` and
//   template <int MR, int NV, bool kDirect>
//   static void tile(int64_t kc, const float* ap, int64_t lda, const float* a_next,
//                    const float* bp, int64_t ldb, const TileOut& out);
// compiled for its instruction set (a target attribute, not a flag on the file: with the flag,
// the copies of inline library functions that file instantiates (std::fill, ...) could be the ones
// the linker keeps for the whole program, and would then fault on a CPU without that set).
#pragma once

#include "kernels/cpu/sgemm.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace weft::cpu::sgemm_detail {

constexpr int64_t kKcMax = 256;          // K block: a B micro-panel of kKcMax x 32 floats stays in L1/L2
constexpr int64_t kABlockBytes = 128 << 10;  // packed A block per thread: in L2 beside the B panels
constexpr int64_t kDirectBBytes = 1 << 20;    // B read in place up to this size (see direct_b)
constexpr int64_t kDirectAPanels = 4;          // A read in place for at most this many column panels
constexpr double kSerialFlops = 5e5;     // below this, one thread: waking the pool costs more (seed 004's
                                         // 1680x28x10 layer: 17 us on 2 threads, 33 on one)

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// A 64-byte aligned scratch buffer that only grows; one per thread for A, one per call for B.
class Scratch {
 public:
  float* get(int64_t floats) {
    if (floats > cap_) {
      const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
      buf_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!buf_) throw std::bad_alloc();
      cap_ = floats;
    }
    return buf_.get();
  }

 private:
  std::unique_ptr<float, FreeDeleter> buf_;
  int64_t cap_ = 0;
};

inline Scratch& a_scratch() {
  thread_local Scratch s;
  return s;
}
inline Scratch& b_scratch() {
  thread_local Scratch s;
  return s;
}

// K split into `count` blocks of nearly equal size, at most kKcMax each.
struct KBlocks {
  int64_t count, size;
  int64_t begin(int64_t kb) const { return kb * size; }
  int64_t len(int64_t kb, int64_t k) const { return std::min(size, k - kb * size); }
};

inline KBlocks split_k(int64_t k) {
  const int64_t count = (k + kKcMax - 1) / kKcMax;
  const int64_t size = (k + count - 1) / count;
  return {count, size};
}

// Packs a panel of W lines (rows of A, or columns of B) over K block [k0, k0 + kc): kc x W floats,
// line w of step k at dst[k * W + w], lines past `lines` zero. `src` points at element (k0, w0);
// the operand stores step k of line w at src[k * ld + w] when `lines_contiguous`, else at
// src[w * ld + k].
template <int W>
void pack_panel(const float* src, int64_t ld, bool lines_contiguous, int64_t lines, int64_t kc, float* dst) {
  if (lines_contiguous) {
    if (lines == W) {
      // A full panel: W floats per step, copied inline. std::copy of a run this short is a call
      // to memmove per step of k, which made packing a transposed A cost 3% of an MLP's step.
      for (int64_t k = 0; k < kc; ++k) {
        const float* s = src + k * ld;
        float* d = dst + k * W;
        for (int w = 0; w < W; ++w) d[w] = s[w];
      }
      return;
    }
    for (int64_t k = 0; k < kc; ++k) {
      float* d = dst + k * W;
      std::copy(src + k * ld, src + k * ld + lines, d);
      std::fill(d + lines, d + W, 0.0f);
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k) std::fill(dst + k * W + lines, dst + (k + 1) * W, 0.0f);
  for (int64_t w = 0; w < lines; ++w)
    for (int64_t k = 0; k < kc; ++k) dst[k * W + w] = src[w * ld + k];
}

// B's panel of columns [j0, j0 + NR) and A's panel of rows [i0, i0 + MR) over K block [k0, k0 + kc).
template <int NR>
void pack_b_panel(const GemmArgs& g, const float* b, int64_t k0, int64_t kc, int64_t j0, float* dst) {
  const float* src = g.tb ? b + j0 * g.ldb + k0 : b + k0 * g.ldb + j0;
  pack_panel<NR>(src, g.ldb, !g.tb, std::min<int64_t>(NR, g.n - j0), kc, dst);
}
template <int MR>
void pack_a_panel(const GemmArgs& g, const float* a, int64_t i0, int64_t k0, int64_t kc, float* dst) {
  const float* src = g.ta ? a + k0 * g.lda + i0 : a + i0 * g.lda + k0;
  pack_panel<MR>(src, g.lda, g.ta, std::min<int64_t>(MR, g.m - i0), kc, dst);
}

// Where one tile's results go: `rows` x `cols` of C at c; accumulate onto what earlier K blocks
// left there; the epilogue only on the last K block.
struct TileOut {
  float* c;
  int64_t ldc;
  int rows;
  int cols;
  bool accumulate;
  const float* bias;  // already offset to the tile's first column; null for none
  bool relu;
  const float* relu_grad_of;  // already offset to the tile's first element (row stride ldc); null for none
};

// Calls f(std::integral_constant<int, R>) with R the tile height for the last, partial panel of
// `rows` rows (1 <= rows < MR): rows rounded up to even. A tile of MR rows over a 4-row remainder
// computed 10 rows of zero padding: 4% of an MLP's 256-row products, 9% of its 128-row ones.
template <int MR, int R = 2, class F>
void with_remainder_rows(int rows, F&& f) {
  if constexpr (R >= MR) {
    f(std::integral_constant<int, MR>{});
  } else {
    if (rows <= R) f(std::integral_constant<int, R>{});
    else with_remainder_rows<MR, R + 2>(rows, std::forward<F>(f));
  }
}

// One GEMM with micro-tiles of MR x (NV * Kernel::kLanes).
template <class Kernel, int MR, int NV>
class Driver {
 public:
  static constexpr int NR = NV * Kernel::kLanes;

  Driver(const GemmArgs& g, const float* a, const float* b, float* c, const SgemmEpilogue& ep)
      : g_(g), a_(a), b_(b), c_(c), ep_(ep), kb_(split_k(g.k)), n_panels_((g.n + NR - 1) / NR),
        n_pad_(n_panels_ * NR), m_panels_((g.m + MR - 1) / MR),
        small_b_(Kernel::kReadBInPlace && !g.tb && g.k * g.n * int64_t{sizeof(float)} <= kDirectBBytes),
        narrow_a_(Kernel::kReadAInPlace && !g.ta && n_panels_ <= kDirectAPanels && g.lda * int64_t{sizeof(float)} % 4096 != 0) {}

  int64_t m_panels() const { return m_panels_; }
  int64_t n_panels() const { return n_panels_; }
  int64_t packed_b_floats() const { return g_.k * n_pad_; }
  bool packs_all_of_b() const { return !small_b_; }

  // Packs those of column panels [q0, q1) of B that are not read in place, all K blocks.
  void pack_b(float* packed, int64_t q0, int64_t q1) const {
    for (int64_t kb = 0; kb < kb_.count; ++kb) {
      const int64_t k0 = kb_.begin(kb), kc = kb_.len(kb, g_.k);
      for (int64_t q = q0; q < q1; ++q)
        if (!direct_b(q)) pack_b_panel<NR>(g_, b_, k0, kc, q * NR, packed + k0 * n_pad_ + q * kc * NR);
    }
  }

  // Row panels [p0, p1) by column panels [q0, q1) of C.
  void compute(const float* packed_b, int64_t p0, int64_t p1, int64_t q0, int64_t q1) const {
    const int64_t block_panels = std::max<int64_t>(1, kABlockBytes / (kb_.size * MR * int64_t{sizeof(float)}));
    float* packed_a = a_scratch().get(block_panels * kb_.size * MR);
    for (int64_t pb = p0; pb < p1; pb += block_panels) {
      const int64_t pe = std::min(p1, pb + block_panels);
      for (int64_t kb = 0; kb < kb_.count; ++kb) {
        const int64_t k0 = kb_.begin(kb), kc = kb_.len(kb, g_.k);
        // Full panels of a row-major A are read in place; transposed A and the last partial
        // panel are packed, the partial one as tall as its tile (with_remainder_rows).
        for (int64_t p = pb; p < pe; ++p) {
          if (direct_a(p)) continue;
          float* dst = packed_a + (p - pb) * kc * MR;
          if (const int rows = panel_rows(p); rows < MR)
            with_remainder_rows<MR>(rows, [&](auto r) { pack_a_panel<decltype(r)::value>(g_, a_, p * MR, k0, kc, dst); });
          else
            pack_a_panel<MR>(g_, a_, p * MR, k0, kc, dst);
        }
        const bool last = kb + 1 == kb_.count;
        for (int64_t q = q0; q < q1; ++q) {
          const int cols = static_cast<int>(std::min<int64_t>(NR, g_.n - q * NR));
          const float* bp = direct_b(q) ? b_ + k0 * g_.ldb + q * NR : packed_b + k0 * n_pad_ + q * kc * NR;
          const int64_t ldb = direct_b(q) ? g_.ldb : NR;
          for (int64_t p = pb; p < pe; ++p) {
            const int rows = panel_rows(p);
            const TileOut out{c_ + p * MR * g_.ldc + q * NR, g_.ldc, rows,
                              cols, kb > 0, last && ep_.bias ? ep_.bias + q * NR : nullptr, last && ep_.relu,
                              last && ep_.relu_grad_of ? ep_.relu_grad_of + p * MR * g_.ldc + q * NR : nullptr};
            const float* ap = packed_a + (p - pb) * kc * MR;
            if (direct_a(p)) {
              // While the first column panel streams this panel of A in, fetch the next one.
              const float* next = q == q0 && p + 1 < p1 ? a_ + (p + 1) * MR * g_.lda + k0 : nullptr;
              Kernel::template tile<MR, NV, true>(kc, a_ + p * MR * g_.lda + k0, g_.lda, next, bp, ldb, out);
            } else if (rows < MR) {
              with_remainder_rows<MR>(rows, [&](auto r) {
                Kernel::template tile<decltype(r)::value, NV, false>(kc, ap, 0, nullptr, bp, ldb, out);
              });
            } else {
              Kernel::template tile<MR, NV, false>(kc, ap, 0, nullptr, bp, ldb, out);
            }
          }
        }
      }
    }
  }

 private:
  int panel_rows(int64_t p) const { return static_cast<int>(std::min<int64_t>(MR, g_.m - p * MR)); }
  // Whole panels of a row-major operand are read in place; the others are packed.
  // A in place only for a few column panels: packing pays for itself once A is read many times,
  // and MR rows 4 KiB apart would fight over one set of L1.
  bool direct_a(int64_t p) const { return narrow_a_ && (p + 1) * MR <= g_.m; }
  // B in place only while all of it stays in L2: read in place, each step of k touches a
  // different row of B, which from memory (or with a power-of-two row stride) is slower than
  // packing it.
  bool direct_b(int64_t q) const { return small_b_ && (q + 1) * NR <= g_.n; }

  const GemmArgs& g_;
  const float* a_;
  const float* b_;
  float* c_;
  SgemmEpilogue ep_;
  KBlocks kb_;
  int64_t n_panels_, n_pad_, m_panels_;
  bool small_b_, narrow_a_;
};

template <class Kernel, int MR, int NV>
void run(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c, const SgemmEpilogue& ep) {
  Driver<Kernel, MR, NV> d(g, a, b, c, ep);
  float* packed_b = b_scratch().get(d.packed_b_floats());
  const int threads = 2.0 * double(g.m) * double(g.n) * double(g.k) < kSerialFlops ? 1 : pool.num_threads();
  if (threads == 1) {
    d.pack_b(packed_b, 0, d.n_panels());
    d.compute(packed_b, 0, d.m_panels(), 0, d.n_panels());
    return;
  }
  if (d.packs_all_of_b()) pool.parallel_for(d.n_panels(), 1, [&](int64_t q0, int64_t q1) { d.pack_b(packed_b, q0, q1); });
  else d.pack_b(packed_b, 0, d.n_panels());  // at most the last, partial, panel
  // Split the rows or the columns of C, whichever leaves the busiest thread fewer tiles, rows on
  // a tie: each thread then packs only its own rows of A. An MLP's 256 x 128 products are 19 x 4
  // tiles: by rows one thread had 40 to the other's 36, by columns each has 38 (its step 1.2%
  // faster). (Counting the remainder tile of rows at its own height instead changed which split
  // an MLP's 128-row products take, and not their time.) Either way every element of C is the
  // same chain of multiply-adds, so the bits do not change.
  auto per_thread = [&](int64_t panels) { return (panels + threads - 1) / threads; };
  const int64_t busiest_by_rows = per_thread(d.m_panels()) * d.n_panels();
  const int64_t busiest_by_cols = d.m_panels() * per_thread(d.n_panels());
  if (busiest_by_rows <= busiest_by_cols) {
    pool.parallel_for(d.m_panels(), 1, [&](int64_t p0, int64_t p1) { d.compute(packed_b, p0, p1, 0, d.n_panels()); });
  } else {
    pool.parallel_for(d.n_panels(), 1, [&](int64_t q0, int64_t q1) { d.compute(packed_b, 0, d.m_panels(), q0, q1); });
  }
}

}  // namespace weft::cpu::sgemm_detail
