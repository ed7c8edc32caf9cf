// CPU MatMul: float32/float64 through gemm.h (weft's own GEMM or CBLAS, threaded on the pool),
// integers through a plain row-parallel loop. Batch dims broadcast; each batch is one GEMM call
// (small ones in parallel over the pool, one per task),
// except that a batch of A's against a single B is one GEMM over all of their rows.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

struct GemmShape {
  int64_t m, n, k;
  bool ta, tb;
  int64_t lda, ldb;  // row-major leading dims of the stored operands
  int64_t batches;
  std::vector<int64_t> a_off, b_off;  // element offsets of each batch's operands
};

GemmShape plan_gemm(const KernelContext& ctx) {
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  const Shape& out = ctx.output(0).shape();
  GemmShape g;
  g.ta = ctx.attrs.get_or<bool>("transpose_a", false);
  g.tb = ctx.attrs.get_or<bool>("transpose_b", false);
  int64_t ar = a.rank(), br = b.rank(), r = out.rank();
  g.m = out[r - 2];
  g.n = out[r - 1];
  g.k = g.ta ? a[ar - 2] : a[ar - 1];
  g.lda = a[ar - 1];
  g.ldb = b[br - 1];
  // Batch offsets through the broadcast plan of the batch dims (operands viewed as one element
  // per matrix), so broadcasting a single matrix against a batch costs nothing.
  Shape ob(std::span<const int64_t>(out.data(), r - 2));
  Shape ab(std::span<const int64_t>(a.data(), ar - 2));
  Shape bb(std::span<const int64_t>(b.data(), br - 2));
  g.batches = ob.num_elements();
  BroadcastPlan<2> plan(ob, {&ab, &bb});
  const int64_t a_mat = a[ar - 2] * a[ar - 1], b_mat = b[br - 2] * b[br - 1];
  plan.for_rows(0, plan.outer, [&](int64_t, const std::array<int64_t, 2>& off) {
    for (int64_t j = 0; j < plan.inner; ++j) {
      g.a_off.push_back((off[0] + j * plan.inner_stride[0]) * a_mat);
      g.b_off.push_back((off[1] + j * plan.inner_stride[1]) * b_mat);
    }
  });
  // Every batch against the same B, and A's batches one after another: then A's rows are one
  // [batches * m, k] matrix and C's one [batches * m, n], and a single GEMM does them all (Dense
  // on the last axis of a [60, 28, 28] input: one product of 1680 rows, not 60 of 28). Not with
  // transpose_a, whose batches' rows are columns of separate matrices.
  bool fold = !g.ta && g.batches > 1;
  for (int64_t i = 0; fold && i < g.batches; ++i)
    fold = g.b_off[static_cast<size_t>(i)] == g.b_off[0] && g.a_off[static_cast<size_t>(i)] == g.a_off[0] + i * a_mat;
  if (fold) {
    g.m *= g.batches;
    g.batches = 1;
    g.a_off.resize(1);
    g.b_off.resize(1);
  }
  return g;
}

template <class T>
void matmul_kernel(KernelContext& ctx) {
  GemmShape g = plan_gemm(ctx);
  const T* a = static_cast<const T*>(raw_data(ctx.input(0)));
  const T* b = static_cast<const T*>(raw_data(ctx.input(1)));
  T* c = static_cast<T*>(raw_data(ctx.output(0)));
  const int64_t c_mat = g.m * g.n;
  if (c_mat == 0) return;
  if (g.k == 0) {
    std::fill(c, c + c_mat * g.batches, T(0));
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    const GemmArgs args{g.m, g.n, g.k, g.ta, g.tb, g.lda, g.ldb, g.n};
    auto product = [&](int64_t i) { gemm_rows<T>(ctx.pool(), args, a + g.a_off[i], b + g.b_off[i], c + i * c_mat); };
    // A batch of small products (attention's, one per head) runs its products in parallel, one
    // task each. Each is one that gemm_rows keeps on one thread anyway (below kMinTileWork), and
    // inside a pool task it runs exactly as it would alone, so the bits are those of the
    // one-after-another loop.
    const int64_t work = g.m * g.n * g.k;
    if (g.batches > 1 && work < kMinTileWork) {
      ctx.pool().parallel_for(g.batches, std::max<int64_t>(1, kMinTileWork / std::max<int64_t>(work, 1)),
                              [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) product(i);
      });
    } else {
      for (int64_t i = 0; i < g.batches; ++i) product(i);
    }
  } else {
    for (int64_t i = 0; i < g.batches; ++i) {
      const T* pa = a + g.a_off[i];
      const T* pb = b + g.b_off[i];
      T* pc = c + i * c_mat;
      using U = std::make_unsigned_t<T>;  // wrap on overflow instead of UB
      ctx.pool().parallel_for(g.m, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.n * g.k, 1)),
                              [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          U* row = reinterpret_cast<U*>(pc + r * g.n);
          std::fill(row, row + g.n, U(0));
          for (int64_t p = 0; p < g.k; ++p) {
            U av = static_cast<U>(g.ta ? pa[p * g.lda + r] : pa[r * g.lda + p]);
            if (g.tb) {
              for (int64_t j = 0; j < g.n; ++j) row[j] += av * static_cast<U>(pb[j * g.ldb + p]);
            } else {
              const T* brow = pb + p * g.ldb;
              for (int64_t j = 0; j < g.n; ++j) row[j] += av * static_cast<U>(brow[j]);
            }
          }
        }
      });
    }
  }
}

}  // namespace

void register_linalg_kernels() {
  register_kernel("MatMul", DeviceType::CPU, float32, matmul_kernel<float>);
  register_kernel("MatMul", DeviceType::CPU, float64, matmul_kernel<double>);
  register_kernel("MatMul", DeviceType::CPU, int32, matmul_kernel<int32_t>);
  register_kernel("MatMul", DeviceType::CPU, int64, matmul_kernel<int64_t>);
  // float16 and bfloat16: a float32 product of the widened operands (float32 accumulation, as
  // cuBLASLt's 16-bit path), rounded once.
  register_via_float32("MatMul");
}

}  // namespace weft::cpu
