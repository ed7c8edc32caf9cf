// Host-side geometry of the CUDA MatMul / FusedMatMul: how one weft product (row-major, batch dims
// broadcast) becomes strided-batched cuBLASLt calls (column-major). Plain C++, built in every
// configuration and unit-tested on the CPU (tests/kernels/matmul_geometry_test.cpp), because the
// CUDA kernel that uses it cannot run everywhere.
//
// Row-major C = op(A) op(B) is, read column-major, C^T = op(B)^T op(A)^T: cuBLASLt's "A" is weft's
// B, its "B" is weft's A, and its D (n x m, leading dim n) is weft's C. No data moves.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/shape.h"

namespace weft::cuda {

// A stored matrix as cuBLASLt describes it: column-major rows x cols with leading dim ld, used
// transposed or not.
struct LtMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transposed = false;
};

// Consecutive batches whose operands are equally spaced (a stride of 0 broadcasts): one strided
// batched call. Offsets and strides are in elements of weft's A, B and C.
struct GemmRun {
  int64_t count = 1;
  int64_t a_offset = 0, a_stride = 0;
  int64_t b_offset = 0, b_stride = 0;
  int64_t c_offset = 0, c_stride = 0;
};

struct GemmGeometry {
  int64_t m = 0, n = 0, k = 0;  // weft's C is (batches, m, n); op(A) m x k; op(B) k x n
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;     // row-major leading dims of weft's stored A and B
  std::vector<GemmRun> runs;    // in batch order; together they cover every batch once
  LtMatrix lt_a, lt_b, lt_c;    // cuBLASLt's A (weft's B), B (weft's A) and C/D (weft's C)
};

// MatMul: a (..., m, k) x b (..., k, n) -> out (..., m, n), the CPU kernel's batching (a batch of
// A's against one B, A's batches contiguous and not transposed, is folded into one GEMM of all
// their rows). `out` is the inferred output shape.
GemmGeometry matmul_geometry(const Shape& a, const Shape& b, const Shape& out, bool ta, bool tb);

// FusedMatMul: A of rank 2 (or higher without ta, its leading dims folded into rows) x a matrix B.
GemmGeometry fused_matmul_geometry(const Shape& a, const Shape& b, const Shape& out, bool ta, bool tb);

// Groups per-batch operand offsets (elements) into runs of equal spacing, at most max_count each.
std::vector<GemmRun> group_runs(const std::vector<int64_t>& a_off, const std::vector<int64_t>& b_off,
                                int64_t c_matrix, int64_t max_count);

// The alignment (bytes, a power of two, at most 256) that every matrix of a run has: that of the
// base address and of the byte stride between batches (ignored when 0 or the run has one batch).
int alignment_of(uintptr_t address, int64_t stride_bytes, int64_t count);

}  // namespace weft::cuda
