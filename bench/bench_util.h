// Timing helpers shared by the benchmarks: best-of-N wall time of a repeated call, and a plain
// table printer. Best-of (not mean) because this machine is shared and noise only adds time.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace weft::bench {

template <class F>
double seconds_per_call(F&& f, int calls, int repeats = 5) {
  for (int i = 0; i < std::max(1, calls / 10); ++i) f();  // warm caches and allocators
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count() / calls);
  }
  return best;
}

// Best per-call times of f and g, measured in alternating rounds of `calls` calls each, so that
// both see the same states of a shared machine: two best-ofs taken one after the other compare
// two moments as much as two implementations.
template <class F, class G>
std::pair<double, double> seconds_per_call_paired(F&& f, G&& g, int calls, int rounds = 20) {
  for (int i = 0; i < std::max(1, calls / 10); ++i) {
    f();
    g();
  }
  double best_f = 1e30, best_g = 1e30;
  auto time = [calls](auto& fn) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  for (int r = 0; r < rounds; ++r) {
    best_f = std::min(best_f, time(f));
    best_g = std::min(best_g, time(g));
  }
  return {best_f, best_g};
}

// The middle of the samples (the upper one of the two middles when their count is even).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string name;
  std::string weft;
  std::string peer;
  std::string ratio;
  std::string goal;
};

inline void print_table(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n%s\n", title.c_str());
  std::printf("| %-40s | %-14s | %-24s | %-14s | %-26s |\n", "benchmark", "weft", "peer", "ratio", "goal");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(42, '-').c_str(), std::string(16, '-').c_str(),
              std::string(26, '-').c_str(), std::string(16, '-').c_str(), std::string(28, '-').c_str());
  for (const Row& r : rows)
    std::printf("| %-40s | %-14s | %-24s | %-14s | %-26s |\n", r.name.c_str(), r.weft.c_str(), r.peer.c_str(),
                r.ratio.c_str(), r.goal.c_str());
}

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace weft::bench
