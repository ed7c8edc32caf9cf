// 16-bit floating-point storage types. weft stores and casts float16 and bfloat16; arithmetic on
// them goes through float32 (cast first), as on CPUs without native half support.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace weft {

struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even, NaN stays NaN (quiet).
inline BFloat16 float_to_bfloat16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}
inline float bfloat16_to_float(BFloat16 h) { return bits_float(static_cast<uint32_t>(h.bits) << 16); }

// IEEE 754 binary16 with round-to-nearest-even, subnormals, infinities and NaN.
inline Half float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)}; // overflow -> inf
  if (abs < 0x38800000u) {                                                    // subnormal or zero
    if (abs < 0x33000000u) return Half{static_cast<uint16_t>(sign)};
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return Half{static_cast<uint16_t>(sign | half_mant)};
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return Half{static_cast<uint16_t>(sign | h)};
}

// double -> float rounded "to odd": truncate toward zero, and set the last bit if anything was
// cut off. A later round-to-nearest into float16 or bfloat16 (many bits narrower) is then correct.
// Rounding to the nearest float first would round twice and can make a false tie:
// 1 + 2^-11 + 2^-40 becomes the float 1 + 2^-11, which ties to 1 instead of rising to 1 + 2^-10.
inline float float_round_to_odd(double d) {
  float f = static_cast<float>(d);
  double back = static_cast<double>(f);
  if (back == d || d != d) return f;
  if (std::fabs(back) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // also turns inf into max
  return bits_float(float_bits(f) | 1u);
}
inline Half double_to_half(double d) { return float_to_half(float_round_to_odd(d)); }
inline BFloat16 double_to_bfloat16(double d) { return float_to_bfloat16(float_round_to_odd(d)); }

inline float half_to_float(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace weft
