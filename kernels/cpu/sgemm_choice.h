// Which float GEMMs go to weft's own AVX-512 kernel (sgemm.h) rather than OpenBLAS, beyond the
// narrow products it always takes (gemm.h: use_own_sgemm).
//
// Whether it wins on general shapes depends on the CPU. On cores with full-width 512-bit FMA
// units (Zen 5, Intel server parts) Debian's OpenBLAS runs its AVX2 kernels at about half of what
// weft's kernel reaches (512^3: 482 vs 232 GFLOP/s on 2 cores); on Zen 4, whose 512-bit FMAs are
// two 256-bit halves, OpenBLAS's cache blocking wins the large square products (2048^3: 208 vs
// 147). So by default it is measured once per process, when the first general product comes.
//
//   WEFT_SGEMM=auto   measure (the default)
//   WEFT_SGEMM=own    weft's kernel for every float product it can take (CPUs with AVX-512)
//   WEFT_SGEMM=blas   OpenBLAS for every product
//
// The two round differently, and a measurement near the margin may go either way, so pin the
// choice with own or blas where separate processes must produce the same bits.
#pragma once

#include <string_view>

namespace weft::cpu {

enum class SgemmChoice { kAuto, kOwn, kBlas };

// "auto", "own" or "blas"; anything else is InvalidArgument naming WEFT_SGEMM and the value.
SgemmChoice parse_sgemm_choice(std::string_view text);

// The process's choice: WEFT_SGEMM when first asked, or what set_sgemm_choice last set.
SgemmChoice sgemm_choice();
void set_sgemm_choice(SgemmChoice choice);

// Under kAuto: whether weft's kernel beat OpenBLAS by a clear margin on a 256x512x512 product,
// timed once (10-15 ms with thread start-up, on first call) and remembered.
bool own_sgemm_wins_general_shapes();

}  // namespace weft::cpu
