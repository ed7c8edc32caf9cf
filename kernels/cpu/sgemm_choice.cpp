#include "kernels/cpu/sgemm_choice.h"

#include <cblas.h>
#include <cpuid.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/error.h"

namespace weft::cpu {

namespace {

SgemmChoice choice_from_environment() {
  const char* env = std::getenv("WEFT_SGEMM");
  return env ? parse_sgemm_choice(env) : SgemmChoice::kAuto;
}

// Set from the environment on first use; an invalid value throws on every use, not just once.
std::atomic<int> g_choice{-1};

// The display family of cpuid leaf 1: the extended family counts only when the base one is 0xF.
unsigned cpu_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}

CpuFeatures read_features() {
  CpuFeatures f;
  // libgcc's check includes the OS enabling the ZMM state (XCR0), not just the cpuid bit.
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!f.avx512f) return f;
  __builtin_cpu_init();
  const bool intel = __builtin_cpu_is("intel");
  const bool amd = __builtin_cpu_is("amd");
  f.full_width_avx512 = intel || (amd && cpu_family() >= 0x1A);
  f.blas_avx512 = blas_core_has_avx512(openblas_get_corename());
  return f;
}

}  // namespace

bool blas_core_has_avx512(const char* core) {
  if (!core) return false;
  std::string name(core);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "skylakex" || name == "cooperlake" || name == "sapphirerapids";
}

SgemmChoice parse_sgemm_choice(std::string_view text) {
  if (text == "auto" || text.empty()) return SgemmChoice::kAuto;
  if (text == "own") return SgemmChoice::kOwn;
  if (text == "blas") return SgemmChoice::kBlas;
  throw InvalidArgument("WEFT_SGEMM is '" + std::string(text) + "': expected auto, own or blas");
}

SgemmChoice sgemm_choice() {
  int c = g_choice.load(std::memory_order_relaxed);
  if (c < 0) {
    c = static_cast<int>(choice_from_environment());
    g_choice.store(c, std::memory_order_relaxed);
  }
  return static_cast<SgemmChoice>(c);
}

void set_sgemm_choice(SgemmChoice choice) { g_choice.store(static_cast<int>(choice), std::memory_order_relaxed); }

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

bool own_sgemm_for(const CpuFeatures& cpu, const GemmArgs& g) {
  if (g.k <= 0) return false;
  if (!cpu.avx512f) {
    if (!cpu.avx2_fma) return false;
    const bool very_narrow = g.n <= kOwnAvx2MaxColsAnyK && !g.ta && g.m >= 128;
    return very_narrow || (g.m >= 1024 && g.n <= kOwnSgemmMaxCols && g.k <= 128);
  }
  const bool narrow = g.n <= kOwnSgemmMaxCols && (g.m >= 1024 || (g.n >= 32 && g.m >= 64));
  return narrow || (cpu.full_width_avx512 && !cpu.blas_avx512 && g.m >= 48 && g.n >= 32);
}

}  // namespace weft::cpu
