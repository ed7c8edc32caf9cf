// WEFT_ISA_CLONES: a function compiled three times, for AVX-512, AVX2 and the baseline (SSE2),
// the CPU's best picked when the program loads (GCC's target_clones). For loops the compiler
// vectorises by itself: the clones run the same operations on wider vectors.
//
//   template <class T>
//   WEFT_ISA_CLONES void scale_range(T* y, T f, int64_t b, int64_t e) { ... }
//
// Every CPU gives the same bits only if the compiler never contracts a multiply and an add into a
// fused multiply-add, which AVX2 and AVX-512 have and SSE2 has not: a file using this is compiled
// with -ffp-contract=off (kernels/CMakeLists.txt). Put it on a named function the hot loop lives
// in: a lambda does not inherit its caller's target, so the pool's lambdas call such a function.
#pragma once

#define WEFT_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
