// CPU kernels of scaled dot-product attention (kernels/defs/attention.cpp says what they compute).
//
// Forward (FlashAttention's online softmax, Dao et al. 2022): each task takes one head and a block
// of kBr query rows, and walks the keys kBc at a time: the block's scores S = q k^T scale (one
// small single-threaded BLAS product), masked; each row's running max m and sum l are updated, the
// output rows rescaled by e^{m_old - m_new} and P V added. The whole Sq x Sk matrix never exists:
// memory is the output plus one kBr x kBc tile per task, linear in the sequence. Key blocks wholly
// above a causal diagonal are skipped.
//
// Gradient (FlashAttention-2's): with D_i = dout_i . out_i, P = e^{S - lse},
// dP = dout v^T (times the dropout mask), dS = P (dP - D); dv = P^T dout, dk = dS^T q scale,
// dq = dS k scale. Two passes recompute the tiles, one per key block (dk, dv) and one per query
// block (dq), so every gradient element is written by one task, summed in a fixed order:
// deterministic, with no atomics and no per-thread copies to reduce. With at least as many heads
// as threads, one task per head computes each tile once instead, in an order that gives the two
// passes' bits.
//
// The blocks are fixed sizes and each task sums its products in a fixed order, so the results are
// the same bits on any thread count and in every mode.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attention_params.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/philox.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

constexpr int64_t kBr = 64;   // query rows per task
constexpr int64_t kBc = 128;  // keys per step

// C = alpha op(A) op(B) + beta C, row-major, on the calling thread.
template <class T>
void tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  use_single_threaded_blas();
  const auto ota = ta ? CblasTrans : CblasNoTrans, otb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ota, otb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ota, otb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

using Geometry = AttentionParams;

// The problem from the attributes and the inputs (q at `first`), with the dropout seed.
Geometry geometry(const KernelContext& ctx, int first, int extra) {
  Geometry g = attention_params(ctx, first, extra);
  if (g.seed_input >= 0) g.seed = static_cast<uint64_t>(*static_cast<const int64_t*>(raw_data(ctx.input(g.seed_input))));
  return g;
}

// The dropout factors of a tile (head bh, rows [i0, i0 + rows), keys [j0, j0 + cols)) into
// `factors`: 0 or 1 / (1 - dropout), from the Philox draw of each element's index, so the
// gradient redraws the forward's mask.
template <class T>
void dropout_factors(const Geometry& g, int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* factors) {
  const Philox4x32 philox(g.seed);
  const float rate = static_cast<float>(g.dropout);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - g.dropout));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t base = static_cast<uint64_t>((bh * g.sq + i0 + r) * g.sk + j0);
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t e = base + static_cast<uint64_t>(c);
      const uint32_t word = philox(e / 4)[e % 4];
      factors[r * cols + c] = unit_float(word) >= rate ? keep_scale : T(0);
    }
  }
}

template <class T>
void apply_dropout(const Geometry& g, int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* p) {
  thread_local std::vector<T> factors;
  factors.resize(static_cast<size_t>(rows * cols));
  dropout_factors(g, bh, i0, rows, j0, cols, factors.data());
  for (int64_t e = 0; e < rows * cols; ++e) p[e] *= factors[static_cast<size_t>(e)];
}

// S = q_rows k_cols^T scale, -inf where the mask or the causal rule hides a key.
template <class T>
void scores(const Geometry& g, const T* q, const T* k, int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
            T* s) {
  tile_gemm<T>(false, true, rows, cols, g.d, static_cast<T>(g.scale), q + i0 * g.d, g.d, k + j0 * g.d, g.d, T(0), s,
               cols);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const int64_t b = bh / g.heads, h = bh % g.heads;
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * cols;
    const int64_t last = g.last_key(i0 + r);
    for (int64_t c = std::max<int64_t>(0, last + 1 - j0); c < cols; ++c) row[c] = minus_inf;
    if (g.mask) {
      const bool* m = g.mask + b * g.mask_stride[0] + h * g.mask_stride[1] + (i0 + r) * g.mask_stride[2];
      for (int64_t c = 0; c < cols; ++c)
        if (!m[(j0 + c) * g.mask_stride[3]]) row[c] = minus_inf;
    }
  }
}

// The keys of [j0, j0 + cols) that causality lets query row i see: [j0, j0 + visible).
int64_t visible_keys(const Geometry& g, int64_t i, int64_t j0, int64_t cols) {
  return std::clamp<int64_t>(g.last_key(i) + 1 - j0, 0, cols);
}

// row[c] = e^{row[c] - shift}: computed for the first `visible` (a causal row's later scores are
// -inf, whose exponential is exactly 0: half a diagonal tile's), 0 for the rest.
template <class T>
void exp_shifted(T* row, T shift, int64_t visible, int64_t cols) {
  for (int64_t c = 0; c < visible; ++c) row[c] -= shift;
  unary_math(UnaryMath::kExp, row, row, visible);
  std::fill(row + visible, row + cols, T(0));
}

// The key blocks query rows [i0, i0 + rows) can see: [0, end).
int64_t key_end(const Geometry& g, int64_t i0, int64_t rows) { return g.last_key(i0 + rows - 1) + 1; }

template <class T>
void attention_kernel(KernelContext& ctx) {
  const Geometry g = geometry(ctx, 0, 3);
  const T* q = ctx.input(0).data<T>();
  const T* k = ctx.input(1).data<T>();
  const T* v = ctx.input(2).data<T>();
  T* out = ctx.output(0).data<T>();
  T* lse = ctx.output(1).data<T>();
  const int64_t heads = g.batch * g.heads, qblocks = (g.sq + kBr - 1) / kBr;
  if (heads * g.sq == 0) return;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  ctx.pool().parallel_for(heads * qblocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> tile(static_cast<size_t>(kBr * kBc));
    T m[kBr], l[kBr];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, i0 = (t % qblocks) * kBr, rows = std::min(kBr, g.sq - i0);
      const T* qh = q + bh * g.sq * g.d;
      const T* kh = k + bh * g.sk * g.d;
      const T* vh = v + bh * g.sk * g.dv;
      T* o = out + (bh * g.sq + i0) * g.dv;
      std::fill(o, o + rows * g.dv, T(0));
      std::fill(m, m + rows, minus_inf);
      std::fill(l, l + rows, T(0));
      const int64_t end = key_end(g, i0, rows);
      for (int64_t j0 = 0; j0 < end; j0 += kBc) {
        const int64_t cols = std::min(kBc, end - j0);
        T* s = tile.data();
        scores(g, qh, kh, bh, i0, rows, j0, cols, s);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = s + r * cols;
          const T top = max_run(row, cols);
          const T m_new = std::max(m[r], top);
          if (m_new == minus_inf) {  // nothing visible yet in this row
            std::fill(row, row + cols, T(0));
            continue;
          }
          exp_shifted(row, m_new, visible_keys(g, i0 + r, j0, cols), cols);
          const T alpha = m[r] == minus_inf ? T(0) : std::exp(m[r] - m_new);
          l[r] = l[r] * alpha + sum_run(row, cols);
          if (alpha != T(1)) {
            T* orow = o + r * g.dv;
            for (int64_t c = 0; c < g.dv; ++c) orow[c] *= alpha;
          }
          m[r] = m_new;
        }
        if (g.dropout > 0) apply_dropout(g, bh, i0, rows, j0, cols, s);
        tile_gemm<T>(false, false, rows, g.dv, cols, T(1), s, cols, vh + j0 * g.dv, g.dv, T(1), o, g.dv);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* orow = o + r * g.dv;
        if (l[r] == T(0)) {  // the row sees no key
          std::fill(orow, orow + g.dv, T(0));
          lse[bh * g.sq + i0 + r] = minus_inf;
          continue;
        }
        const T inv = T(1) / l[r];
        for (int64_t c = 0; c < g.dv; ++c) orow[c] *= inv;
        lse[bh * g.sq + i0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// For the tile of rows [i0, i0 + rows) and keys [j0, j0 + cols): P (into p) and dS (into ds).
template <class T>
void gradient_tile(const Geometry& g, const T* qh, const T* kh, const T* vh, const T* dout_h, const T* lse_h,
                   const T* delta_h, int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* p, T* ds) {
  scores(g, qh, kh, bh, i0, rows, j0, cols, p);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    T* row = p + r * cols;
    const T shift = lse_h[i0 + r];
    if (shift == minus_inf) {
      std::fill(row, row + cols, T(0));
      continue;
    }
    exp_shifted(row, shift, visible_keys(g, i0 + r, j0, cols), cols);
  }
  // dP = dout v^T, then through the dropout mask; dS = P (dP - D).
  tile_gemm<T>(false, true, rows, cols, g.dv, T(1), dout_h + i0 * g.dv, g.dv, vh + j0 * g.dv, g.dv, T(0), ds, cols);
  if (g.dropout == 0) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ds[r * cols + c] = p[r * cols + c] * (ds[r * cols + c] - delta_h[i0 + r]);
    return;
  }
  // The tile's mask, drawn once: dP goes through it, and dv takes the dropped P.
  thread_local std::vector<T> keep;
  keep.resize(static_cast<size_t>(rows * cols));
  dropout_factors(g, bh, i0, rows, j0, cols, keep.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t e = r * cols + c;
      ds[e] = p[e] * (ds[e] * keep[static_cast<size_t>(e)] - delta_h[i0 + r]);
      p[e] *= keep[static_cast<size_t>(e)];
    }
}

template <class T>
void attention_grad_kernel(KernelContext& ctx) {
  const Geometry g = geometry(ctx, 1, 6);
  const T* dout = ctx.input(0).data<T>();
  const T* q = ctx.input(1).data<T>();
  const T* k = ctx.input(2).data<T>();
  const T* v = ctx.input(3).data<T>();
  const T* out = ctx.input(4).data<T>();
  const T* lse = ctx.input(5).data<T>();
  T* dq = ctx.output(0).data<T>();
  T* dk = ctx.output(1).data<T>();
  T* dv = ctx.output(2).data<T>();
  const int64_t heads = g.batch * g.heads;
  std::fill(dq, dq + ctx.output(0).size(), T(0));
  std::fill(dk, dk + ctx.output(1).size(), T(0));
  std::fill(dv, dv + ctx.output(2).size(), T(0));
  if (heads * g.sq * g.sk == 0) return;
  // D_i = dout_i . out_i
  std::vector<T> delta(static_cast<size_t>(heads * g.sq));
  ctx.pool().parallel_for(heads * g.sq, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(g.dv, 1)),
                          [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T s = 0;
      for (int64_t c = 0; c < g.dv; ++c) s += dout[r * g.dv + c] * out[r * g.dv + c];
      delta[static_cast<size_t>(r)] = s;
    }
  });
  const T scale = static_cast<T>(g.scale);
  auto head = [&](int64_t bh) {
    struct {
      const T *q, *k, *v, *dout, *lse, *delta;
    } h{q + bh * g.sq * g.d, k + bh * g.sk * g.d, v + bh * g.sk * g.dv, dout + bh * g.sq * g.dv, lse + bh * g.sq,
        delta.data() + bh * g.sq};
    return h;
  };
  const int64_t kblocks = (g.sk + kBc - 1) / kBc, qblocks = (g.sq + kBr - 1) / kBr;
  // With at least a head per thread, one task per head and one pass: each tile once, its P^T dout
  // and dS^T q added to its key block's dv and dk and its dS k to its query block's dq. Key blocks
  // outside, query blocks inside, so each gradient element adds its tiles in the two passes' very
  // order (dv, dk over query blocks ascending; dq over key blocks ascending): the same bits, from
  // five products a tile and one exponential instead of seven and two.
  if (heads >= ctx.pool().num_threads()) {
    ctx.pool().parallel_for(heads, 1, [&](int64_t t0, int64_t t1) {
      std::vector<T> p(static_cast<size_t>(kBr * kBc)), ds(p.size());
      for (int64_t bh = t0; bh < t1; ++bh) {
        const auto h = head(bh);
        for (int64_t j0 = 0; j0 < g.sk; j0 += kBc) {
          const int64_t cols = std::min(kBc, g.sk - j0);
          for (int64_t i0 = 0; i0 < g.sq; i0 += kBr) {
            const int64_t rows = std::min(kBr, g.sq - i0);
            if (key_end(g, i0, rows) <= j0) continue;
            gradient_tile(g, h.q, h.k, h.v, h.dout, h.lse, h.delta, bh, i0, rows, j0, cols, p.data(), ds.data());
            tile_gemm<T>(true, false, cols, g.dv, rows, T(1), p.data(), cols, h.dout + i0 * g.dv, g.dv, T(1),
                         dv + (bh * g.sk + j0) * g.dv, g.dv);
            tile_gemm<T>(true, false, cols, g.d, rows, scale, ds.data(), cols, h.q + i0 * g.d, g.d, T(1),
                         dk + (bh * g.sk + j0) * g.d, g.d);
            tile_gemm<T>(false, false, rows, g.d, cols, scale, ds.data(), cols, h.k + j0 * g.d, g.d, T(1),
                         dq + (bh * g.sq + i0) * g.d, g.d);
          }
        }
      }
    });
    return;
  }
  // Fewer heads than threads: two passes, so that blocks of one head run on several threads.
  // dk and dv: one task per key block, over the query blocks that see it.
  ctx.pool().parallel_for(heads * kblocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> p(static_cast<size_t>(kBr * kBc)), ds(p.size());
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / kblocks, j0 = (t % kblocks) * kBc, cols = std::min(kBc, g.sk - j0);
      const auto h = head(bh);
      for (int64_t i0 = 0; i0 < g.sq; i0 += kBr) {
        const int64_t rows = std::min(kBr, g.sq - i0);
        if (key_end(g, i0, rows) <= j0) continue;  // the whole block is hidden from these rows
        gradient_tile(g, h.q, h.k, h.v, h.dout, h.lse, h.delta, bh, i0, rows, j0, cols, p.data(), ds.data());
        tile_gemm<T>(true, false, cols, g.dv, rows, T(1), p.data(), cols, h.dout + i0 * g.dv, g.dv, T(1),
                     dv + (bh * g.sk + j0) * g.dv, g.dv);
        tile_gemm<T>(true, false, cols, g.d, rows, scale, ds.data(), cols, h.q + i0 * g.d, g.d, T(1),
                     dk + (bh * g.sk + j0) * g.d, g.d);
      }
    }
  });
  // dq: one task per query block, over the key blocks it sees.
  ctx.pool().parallel_for(heads * qblocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> p(static_cast<size_t>(kBr * kBc)), ds(p.size());
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, i0 = (t % qblocks) * kBr, rows = std::min(kBr, g.sq - i0);
      const auto h = head(bh);
      const int64_t end = key_end(g, i0, rows);
      for (int64_t j0 = 0; j0 < end; j0 += kBc) {
        const int64_t cols = std::min(kBc, g.sk - j0);
        gradient_tile(g, h.q, h.k, h.v, h.dout, h.lse, h.delta, bh, i0, rows, j0, cols, p.data(), ds.data());
        tile_gemm<T>(false, false, rows, g.d, cols, scale, ds.data(), cols, h.k + j0 * g.d, g.d, T(1),
                     dq + (bh * g.sq + i0) * g.d, g.d);
      }
    }
  });
}

// AttentionDropoutMask(q, k, seed): the factors dropout_factors gives the fused kernels, for the
// whole [B, H, Sq, Sk], one task per block of query rows.
template <class T>
void dropout_mask_kernel(KernelContext& ctx) {
  Geometry g = dropout_mask_params(ctx);
  g.seed = static_cast<uint64_t>(*static_cast<const int64_t*>(raw_data(ctx.input(g.seed_input))));
  T* out = static_cast<T*>(raw_data(ctx.output(0)));
  const int64_t qblocks = (g.sq + kBr - 1) / kBr;
  ctx.pool().parallel_for(g.batch * g.heads * qblocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, i0 = (t % qblocks) * kBr, rows = std::min(kBr, g.sq - i0);
      dropout_factors(g, bh, i0, rows, 0, g.sk, out + (bh * g.sq + i0) * g.sk);
    }
  });
}

}  // namespace

void register_attention_kernels() {
  register_kernel("ScaledDotProductAttention", DeviceType::CPU, float32, attention_kernel<float>);
  register_kernel("ScaledDotProductAttention", DeviceType::CPU, float64, attention_kernel<double>);
  register_kernel("ScaledDotProductAttentionGrad", DeviceType::CPU, float32, attention_grad_kernel<float>);
  register_kernel("ScaledDotProductAttentionGrad", DeviceType::CPU, float64, attention_grad_kernel<double>);
  register_via_float32({"ScaledDotProductAttention", "ScaledDotProductAttentionGrad"});
  register_kernel("AttentionDropoutMask", DeviceType::CPU, float32, dropout_mask_kernel<float>);
  register_kernel("AttentionDropoutMask", DeviceType::CPU, float64, dropout_mask_kernel<double>);
}

}  // namespace weft::cpu
