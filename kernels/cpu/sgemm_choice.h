// Which float GEMMs go to weft's own kernel (sgemm.h: AVX2 or AVX-512 variant) rather than OpenBLAS.
//
// The two round differently, so the choice decides the bits of every float product. It is a pure
// function of the CPU's features and the product's shape (own_sgemm_for), never of a timing:
// data-parallel replicas and restarted jobs on like machines must compute the same bits, and a
// start-up measurement on a loaded machine could go either way. (An earlier version timed both
// kernels once per process.)
//
// The rule, from measurements on the CPUs weft has run on:
//   - AVX2 and FMA without AVX-512F (the AVX2 variant): very narrow products (n <= 16) of at
//     least 128 rows whose A it reads in place (not transposed): 2x OpenBLAS at 60000x128 by
//     128x10, 1.8x at 256x128 by 128x10; and tall narrow ones (m >= 1024, n <= 128) with a short
//     inner dimension (k <= 128: 10% faster). Elsewhere its kernel reaches about 90% of
//     OpenBLAS's hand-written Haswell kernels (single-threaded, on a Zen 3 VM).
//   - neither: OpenBLAS, always.
//   - narrow products with enough rows (n <= 128 columns; m >= 1024, or n >= 32 and m >= 64):
//     weft's kernel on every AVX-512 CPU measured, 20-35% faster than OpenBLAS running AVX2
//     kernels, and level or faster where OpenBLAS has AVX-512 ones (below).
//   - other products with m >= 48 and n >= 32: weft's kernel where the cores execute 512-bit
//     FMAs at full width (Intel's AVX-512 parts; AMD from Zen 5, family 1Ah) and OpenBLAS runs
//     AVX2 kernels there, at about half the speed (512^3: 482 vs 232 GFLOP/s on 2 cores; 1.3-3x
//     for m >= 128). Not where OpenBLAS has AVX-512 kernels of its own for the CPU (its core is
//     SkylakeX, Cooperlake or SapphireRapids: Debian's runtime-dispatched OpenBLAS picks them by
//     CPU model): there they win these shapes by up to 40% (2048^3: 250 vs 196 GFLOP/s, 512^3:
//     239 vs 174, 8192x512 by 512x512: 225 vs 171; seed 004's deep layers 114 vs 141 ms), while
//     the narrow products above stay weft's, level or faster (60000x784 by 784x128: 204 vs 177;
//     256x784 by 784x128: 194 vs 180; the MLP training step 0.92 vs 1.02 ms). Best of
//     alternating runs on a 2-core Cascade Lake at 2.5 GHz, 2026-11-28. On Zen 4 (family 19h),
//     whose 512-bit FMAs are two 256-bit halves, OpenBLAS's cache blocking wins the large squares
//     (2048^3: 208 vs 147 GFLOP/s), so they stay with OpenBLAS.
//   - the rest (fewer than 32 columns or 48 rows): OpenBLAS, whose small-matrix kernels are better
//     there (a 16-wide tile is mostly padding; 60 x 10 x 784 measured 2x slower in weft's).
// AMD's mobile Zen 5 parts double-pump 512-bit FMAs like Zen 4 but share family 1Ah, so they
// get weft's kernel for general shapes too and may lose the large squares as Zen 4 does; pin
// WEFT_SGEMM=blas there if those matter.
//
//   WEFT_SGEMM=auto   the rule above (the default)
//   WEFT_SGEMM=own    weft's kernel for every float product it can take (CPUs with AVX2 and FMA)
//   WEFT_SGEMM=blas   OpenBLAS for every product
//
// Every process on machines with the same CPU model, OpenBLAS build, thread count and setting
// computes the same bits. Pin own or blas for equal bits across CPU models (own: among all CPUs
// with AVX2 and FMA, since both variants follow one order of operations (sgemm_driver.h); blas:
// with the same OpenBLAS build and the same kernels chosen by it for the cores).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/cpu/sgemm.h"

namespace weft::cpu {

enum class SgemmChoice { kAuto, kOwn, kBlas };

// "auto", "own" or "blas"; anything else is InvalidArgument naming WEFT_SGEMM and the value.
SgemmChoice parse_sgemm_choice(std::string_view text);

// The process's choice: WEFT_SGEMM when first asked, or what set_sgemm_choice last set.
SgemmChoice sgemm_choice();
void set_sgemm_choice(SgemmChoice choice);

// What the rule reads of the CPU.
struct CpuFeatures {
  bool avx512f = false;            // the AVX-512 variant can run
  bool full_width_avx512 = false;  // 512-bit FMAs execute at full width, not as two 256-bit halves
  bool avx2_fma = false;           // the AVX2 variant can run
  bool blas_avx512 = false;        // OpenBLAS's kernels for this CPU are AVX-512 ones
};

// Whether an OpenBLAS core (openblas_get_corename(), any case) has AVX-512 SGEMM kernels.
bool blas_core_has_avx512(const char* core);

// From cpuid: avx512f from leaf 7 (and the OS saving the ZMM state), full width from the vendor
// and family as described above; blas_avx512 from the core OpenBLAS chose. Read once.
const CpuFeatures& host_cpu_features();

// The widest product counted as narrow.
constexpr int64_t kOwnSgemmMaxCols = 128;
// Without AVX-512: the widest product given to the AVX2 variant whatever its inner dimension.
constexpr int64_t kOwnAvx2MaxColsAnyK = 16;

// Pure: whether the rule gives a product of this shape to weft's kernel on a CPU with `cpu`.
bool own_sgemm_for(const CpuFeatures& cpu, const GemmArgs& g);

}  // namespace weft::cpu
