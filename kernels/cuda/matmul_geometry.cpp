#include "kernels/cuda/matmul_geometry.h"

#include <algorithm>
#include <array>
#include <limits>

#include "kernels/cpu/broadcast_plan.h"

namespace weft::cuda {

namespace {

// The column-major operands of C^T = op(B)^T op(A)^T (see the header).
void set_lt_matrices(GemmGeometry& g) {
  // weft's B is stored row-major (k, n), or (n, k) with tb: column-major that is (n, k) with
  // ld ldb, used as is, or (k, n) used transposed. Either way op() gives n x k.
  g.lt_a = {g.tb ? g.k : g.n, g.tb ? g.n : g.k, g.ldb, g.tb};
  // weft's A is stored (m, k), or (k, m) with ta: column-major (k, m) as is, or (m, k)
  // transposed. Either way op() gives k x m.
  g.lt_b = {g.ta ? g.m : g.k, g.ta ? g.k : g.m, g.lda, g.ta};
  g.lt_c = {g.n, g.m, g.n, false};
}

}  // namespace

std::vector<GemmRun> group_runs(const std::vector<int64_t>& a_off, const std::vector<int64_t>& b_off,
                                int64_t c_matrix, int64_t max_count) {
  std::vector<GemmRun> runs;
  const int64_t batches = static_cast<int64_t>(a_off.size());
  auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  for (int64_t i = 0; i < batches;) {
    GemmRun r;
    r.a_offset = at(a_off, i);
    r.b_offset = at(b_off, i);
    r.c_offset = i * c_matrix;
    r.c_stride = c_matrix;
    int64_t j = i + 1;
    if (j < batches && max_count > 1) {
      r.a_stride = at(a_off, j) - r.a_offset;
      r.b_stride = at(b_off, j) - r.b_offset;
      // Only forward (or broadcast) steps: cuBLASLt documents no negative batch strides.
      if (r.a_stride >= 0 && r.b_stride >= 0)
        while (j < batches && j - i < max_count && at(a_off, j) - at(a_off, j - 1) == r.a_stride &&
               at(b_off, j) - at(b_off, j - 1) == r.b_stride)
          ++j;
    }
    r.count = j - i;
    if (r.count == 1) r.a_stride = r.b_stride = 0;
    runs.push_back(r);
    i = j;
  }
  return runs;
}

int alignment_of(uintptr_t address, int64_t stride_bytes, int64_t count) {
  uint64_t bits = static_cast<uint64_t>(address) | 256u;
  if (count > 1 && stride_bytes != 0) {
    const uint64_t s = static_cast<uint64_t>(stride_bytes < 0 ? -stride_bytes : stride_bytes);
    bits |= s;
  }
  return static_cast<int>(bits & (~bits + 1));  // the lowest set bit
}

GemmGeometry matmul_geometry(const Shape& a, const Shape& b, const Shape& out, bool ta, bool tb) {
  GemmGeometry g;
  g.ta = ta;
  g.tb = tb;
  const int64_t ar = a.rank(), br = b.rank(), r = out.rank();
  g.m = out[r - 2];
  g.n = out[r - 1];
  g.k = ta ? a[ar - 2] : a[ar - 1];
  g.lda = a[ar - 1];
  g.ldb = b[br - 1];
  if (ar == 2 && br == 2) {  // the common case, without the batch plan's allocations
    g.runs.push_back(GemmRun{});
    g.runs[0].c_stride = g.m * g.n;
    set_lt_matrices(g);
    return g;
  }
  // The batch offsets the CPU kernel computes (kernels/cpu/linalg.cpp), through the same plan.
  Shape ob(std::span<const int64_t>(out.data(), r - 2));
  Shape ab(std::span<const int64_t>(a.data(), ar - 2));
  Shape bb(std::span<const int64_t>(b.data(), br - 2));
  const int64_t batches = ob.num_elements();
  std::vector<int64_t> a_off, b_off;
  a_off.reserve(static_cast<size_t>(std::max<int64_t>(batches, 0)));
  b_off.reserve(static_cast<size_t>(std::max<int64_t>(batches, 0)));
  if (batches > 0) {
    cpu::BroadcastPlan<2> plan(ob, {&ab, &bb});
    const int64_t a_mat = a[ar - 2] * a[ar - 1], b_mat = b[br - 2] * b[br - 1];
    plan.for_rows(0, plan.outer, [&](int64_t, const std::array<int64_t, 2>& off) {
      for (int64_t j = 0; j < plan.inner; ++j) {
        a_off.push_back((off[0] + j * plan.inner_stride[0]) * a_mat);
        b_off.push_back((off[1] + j * plan.inner_stride[1]) * b_mat);
      }
    });
    // Fold as the CPU does: every batch against one B, A's batches one after another.
    bool fold = !ta && batches > 1;
    for (int64_t i = 0; fold && i < batches; ++i)
      fold = b_off[static_cast<size_t>(i)] == b_off[0] && a_off[static_cast<size_t>(i)] == a_off[0] + i * a_mat;
    if (fold) {
      g.m *= batches;
      a_off.resize(1);
      b_off.resize(1);
    }
  }
  // cuBLASLt's batch count is an int32.
  g.runs = group_runs(a_off, b_off, g.m * g.n, std::numeric_limits<int32_t>::max());
  set_lt_matrices(g);
  return g;
}

GemmGeometry fused_matmul_geometry(const Shape& a, const Shape& b, const Shape& out, bool ta, bool tb) {
  GemmGeometry g;
  g.ta = ta;
  g.tb = tb;
  const int64_t ar = a.rank();
  g.n = out[out.rank() - 1];
  g.m = g.n > 0 ? out.num_elements() / g.n : 0;  // every leading dim of A, as rows
  if (g.n == 0) {
    g.m = 1;
    for (int64_t d = 0; d + 1 < out.rank(); ++d) g.m *= out[d];
  }
  g.k = ta ? a[0] : a[ar - 1];
  g.lda = a[ar - 1];
  g.ldb = b[1];
  g.runs.push_back(GemmRun{});
  g.runs[0].c_stride = g.m * g.n;
  set_lt_matrices(g);
  return g;
}

}  // namespace weft::cuda
