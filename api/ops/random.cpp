#include "api/ops/random.h"

#include <atomic>
#include <chrono>
#include <random>

namespace weft::random {

namespace {

// Unseeded draws take the next seed of a process-wide sequence started from the clock and
// std::random_device, so two unseeded calls differ and two processes differ.
int64_t resolve_seed(int64_t seed) {
  if (seed >= 0) return seed;
  static std::atomic<uint64_t> next{[] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }()};
  // Spread consecutive seeds apart (splitmix64 step) so streams are unrelated.
  uint64_t z = next.fetch_add(0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

}  // namespace

Tensor normal(const Shape& shape, double mean, double stddev, int64_t seed, DType dtype, const SourceLocation& loc) {
  static const OpDef& op = op_def("RandomNormal");
  return dispatch1(op, {},
                   {{"shape", shape}, {"mean", mean}, {"stddev", stddev}, {"seed", resolve_seed(seed)}, {"dtype", dtype}},
                   loc);
}

Tensor uniform(const Shape& shape, double low, double high, int64_t seed, DType dtype, const SourceLocation& loc) {
  static const OpDef& op = op_def("RandomUniform");
  return dispatch1(op, {},
                   {{"shape", shape}, {"low", low}, {"high", high}, {"seed", resolve_seed(seed)}, {"dtype", dtype}},
                   loc);
}

}  // namespace weft::random
