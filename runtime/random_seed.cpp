#include "runtime/random_seed.h"

#include <atomic>
#include <chrono>
#include <random>

#include "runtime/attr.h"

namespace weft {

namespace {

// Started from the clock and std::random_device, so two processes differ.
std::atomic<uint64_t>& next_seed() {
  static std::atomic<uint64_t> next{[] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }()};
  return next;
}

}  // namespace

int64_t resolve_seed(int64_t seed) {
  if (seed >= 0) return seed;
  // Spread consecutive seeds apart (splitmix64 step) so streams are unrelated.
  uint64_t z = next_seed().fetch_add(0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

void set_global_seed(int64_t seed) { next_seed().store(static_cast<uint64_t>(seed) * 0x2545F4914F6CDD1Dull); }

RandomStream random_stream(const Attrs& attrs, uint64_t execution) {
  const int64_t seed = attrs.get<int64_t>("seed");
  if (seed >= 0) return {static_cast<uint64_t>(seed), 0};
  const int64_t stream_seed = attrs.get_or<int64_t>("stream_seed", -1);
  if (stream_seed >= 0) return {static_cast<uint64_t>(stream_seed), execution};
  return {static_cast<uint64_t>(resolve_seed(-1)), 0};
}

}  // namespace weft
