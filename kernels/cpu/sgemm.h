// weft's own float GEMM for CPUs with AVX2 and FMA, or AVX-512: C = op(A) op(B), row-major, optionally followed by
// `act(C + bias)`, or by ReluGrad(C, x), applied while each tile of C is still in registers (the
// epilogues of FusedMatMul).
//
//   if (sgemm_available()) sgemm(pool, g, a, b, c, {.bias = bias, .relu = true});
//
// gemm.h decides when to use it instead of OpenBLAS.
//
// Why not OpenBLAS for these: the products of an MLP are tall and narrow (60000x784 by 784x128)
// or small (256x784 by 784x128), and there OpenBLAS zeroes C before accumulating into it, packs
// both operands on every call, and spins its own threads beside weft's pool. This GEMM packs B
// once per call, packs A a cache block at a time, writes C once (epilogue included), and threads
// on weft's pool. Each element of C sums over k in the same order whatever the thread count and
// the instruction set, so results are deterministic, equal between eager and traced runs, and
// equal on every CPU that runs it.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"

namespace weft::cpu {

// C = op(A) op(B): m x n, inner dimension k; op transposes when ta/tb; leading dimensions of the
// operands as stored, row-major.
struct GemmArgs {
  int64_t m, n, k;
  bool ta, tb;
  int64_t lda, ldb, ldc;
};

struct SgemmEpilogue {
  const float* bias = nullptr;  // n floats added to every row of C, or none
  bool relu = false;            // then max(0, x), NaN passing through as ReluOp does (elementwise_ops.h)
  // Then, when set, C's element is kept where this m x n matrix (row stride ldc, as C) is
  // positive and is +0 elsewhere: ReluGrad(C, x), the ReluGrad kernel's `x > 0 ? dy : 0`.
  const float* relu_grad_of = nullptr;
};

// True when this CPU has AVX-512F, or AVX2 and FMA; sgemm must not be called otherwise. The
// variants (sgemm_avx2.cpp, sgemm_avx512.cpp) give the same bits (sgemm_driver.h says why).
bool sgemm_available();
// True when sgemm runs its AVX-512 variant.
bool sgemm_has_avx512();

// Requires g.k > 0 and lda/ldb/ldc consistent with the row-major layout of each operand.
void sgemm(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c,
           const SgemmEpilogue& epilogue = {});

}  // namespace weft::cpu
