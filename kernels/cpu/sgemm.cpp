// Picks the instruction-set variant of weft's own GEMM for this CPU, once.
#include "kernels/cpu/sgemm.h"

#include "kernels/cpu/sgemm_isa.h"

namespace weft::cpu {

namespace {

using SgemmFn = void (*)(ThreadPool&, const GemmArgs&, const float*, const float*, float*, const SgemmEpilogue&);

SgemmFn variant_for_this_cpu() {
  if (__builtin_cpu_supports("avx512f")) return sgemm_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return sgemm_avx2;
  return nullptr;
}

SgemmFn variant() {
  static const SgemmFn fn = variant_for_this_cpu();
  return fn;
}

}  // namespace

bool sgemm_available() { return variant() != nullptr; }

bool sgemm_has_avx512() { return variant() == sgemm_avx512; }

void sgemm(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c, const SgemmEpilogue& ep) {
  if (g.m <= 0 || g.n <= 0) return;
  variant()(pool, g, a, b, c, ep);
}

}  // namespace weft::cpu
