// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator. Block b of a stream is philox(key = seed, counter = b), so any element
// can be computed independently, on any thread or device, in any order. The counter's high 64
// bits number the stream: run k of an unseeded node in a compiled graph draws stream k of its
// key (runtime/random_seed.h); stream 0 is every other draw.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/host_device.h"

namespace weft {

struct Philox4x32 {
  uint32_t key0, key1;

  WEFT_HOST_DEVICE explicit Philox4x32(uint64_t seed)
      : key0(static_cast<uint32_t>(seed)), key1(static_cast<uint32_t>(seed >> 32)) {}

  WEFT_HOST_DEVICE std::array<uint32_t, 4> operator()(uint64_t block, uint64_t stream = 0) const {
    uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
    uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return {c0, c1, c2, c3};
  }
};

// [0, 1) with 24 random bits; (0, 1] variant for logarithms.
WEFT_HOST_DEVICE inline float unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
WEFT_HOST_DEVICE inline float unit_float_open0(uint32_t x) {
  return static_cast<float>((x >> 8) + 1) * (1.0f / 16777216.0f);
}
// [0, 1) with 53 random bits from two words.
WEFT_HOST_DEVICE inline double unit_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}
WEFT_HOST_DEVICE inline double unit_double_open0(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>((bits & ((uint64_t{1} << 53) - 1)) + 1) * (1.0 / 9007199254740992.0);
}

}  // namespace weft
