// The instruction-set variants of weft's own GEMM; sgemm() in sgemm.cpp picks one for this CPU.
// Each may only be called on a CPU that has its instruction set.
#pragma once

#include "kernels/cpu/sgemm.h"

namespace weft::cpu {

void sgemm_avx512(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c,
                  const SgemmEpilogue& ep);
void sgemm_avx2(ThreadPool& pool, const GemmArgs& g, const float* a, const float* b, float* c,
                const SgemmEpilogue& ep);

}  // namespace weft::cpu
