#include "kernels/cpu/sgemm_choice.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace weft::cpu {

namespace {

SgemmChoice choice_from_environment() {
  const char* env = std::getenv("WEFT_SGEMM");
  return env ? parse_sgemm_choice(env) : SgemmChoice::kAuto;
}

// Set from the environment on first use; an invalid value throws on every use, not just once.
std::atomic<int> g_choice{-1};

// Best of several timings, alternating the two so that a slow moment of a shared machine hits
// both alike.
bool measure_own_faster() {
  constexpr int64_t m = 256, n = 512, k = 512;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.5f - 1.5f;
  ThreadPool& pool = cpu_device()->pool();
  const GemmArgs g{m, n, k, false, false, k, n, n};
  auto own = [&] { sgemm(pool, g, a.data(), b.data(), c.data()); };
  auto blas = [&] { blas_gemm<float>(g, a.data(), b.data(), c.data()); };
  auto seconds = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 2; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  own();  // warm both: page faults, OpenBLAS's threads starting
  blas();
  double best_own = 1e30, best_blas = 1e30;
  for (int round = 0; round < 3; ++round) {
    best_own = std::min(best_own, seconds(own));
    best_blas = std::min(best_blas, seconds(blas));
  }
  // A clear margin: where the two are close, OpenBLAS stays, as before the measurement existed.
  return best_own * 1.15 < best_blas;
}

}  // namespace

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

bool own_sgemm_wins_general_shapes() {
  static const bool wins = sgemm_available() && measure_own_faster();
  return wins;
}

}  // namespace weft::cpu
