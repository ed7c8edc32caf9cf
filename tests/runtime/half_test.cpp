// float16 and bfloat16 conversions, checked against the first-principles references of
// tests/half_reference.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "half_reference.h"
#include "runtime/half.h"

namespace weft {
namespace {

using ref::bf16_value;
using ref::half_value;
using ref::is_bf16_nan;
using ref::is_half_nan;
uint16_t reference_to_half(double x) { return ref::to_half_bits(x); }
uint16_t reference_to_bf16(float f) { return ref::to_bf16_bits(f); }

float from_bits(uint32_t u) { return bits_float(u); }

TEST(Float16, HandPickedValues) {
  EXPECT_EQ(float_to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(float_to_half(0.0f).bits, 0x0000);
  EXPECT_EQ(float_to_half(-0.0f).bits, 0x8000);
  EXPECT_EQ(float_to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f).bits, 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f).bits, 0x7c00);  // the tie rounds to even: overflow
  EXPECT_EQ(float_to_half(1e6f).bits, 0x7c00);
  EXPECT_EQ(float_to_half(-1e6f).bits, 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
  // Ties to even in the normal range: 1 + 2^-11 lies between 0x3c00 and 0x3c01.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)).bits, 0x3c01);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie with zero and goes to zero.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)).bits, 0x0000);
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits, 0x0001);
  EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)).bits, 0x0002);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)).bits, 0x0400);     // smallest normal
  EXPECT_EQ(float_to_half(1023 * std::ldexp(1.0f, -24)).bits, 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -30)).bits, 0x8000);     // underflow keeps the sign
  EXPECT_EQ(half_to_float(Half{0x3555}), 0.333251953125f);
}

TEST(Float16, NaNStaysNaNWithItsSign) {
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0xffc00000u, 0xff800001u}) {
    Half h = float_to_half(from_bits(u));
    EXPECT_TRUE(is_half_nan(h.bits)) << std::hex << u << " -> " << h.bits;
    EXPECT_EQ(h.bits >> 15, u >> 31);
  }
}

// Every one of the 65536 patterns: half -> float is exact, and float -> half gives the pattern back.
TEST(Float16, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = half_to_float(Half{bits});
    double want = half_value(bits);
    if (is_half_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (bits >> 15) != 0) << std::hex << b;
      uint16_t back = float_to_half(f).bits;
      ASSERT_TRUE(is_half_nan(back)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (bits >> 15) != 0) << std::hex << b;
    ASSERT_EQ(float_to_half(f).bits, bits) << std::hex << b;
  }
}

// Exactly between two neighbours ties go to even; one float ulp either side decides.
TEST(Float16, MidpointsRoundToEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    double lo = half_value(h), hi = half_value(h + 1);
    float mid = static_cast<float>((lo + hi) / 2);  // 12 significant bits: exact in float
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_half(mid).bits, even) << std::hex << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, 1e9f)).bits, h + 1) << std::hex << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, 0.0f)).bits, h) << std::hex << h;
    ASSERT_EQ(float_to_half(-mid).bits, 0x8000 | even) << std::hex << h;
  }
}

TEST(Float16, RandomFloatsMatchCorrectRounding) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    // Draw exponents near the half range most of the time, anything otherwise.
    uint32_t u = rng();
    if (i % 4) u = (u & 0x807fffffu) | ((100u + rng() % 60u) << 23);
    float f = from_bits(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f).bits, reference_to_half(f)) << std::hex << u;
  }
}

TEST(BFloat16, HandPickedValues) {
  EXPECT_EQ(float_to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-1.0f).bits, 0xbf80);
  EXPECT_EQ(float_to_bfloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);      // tie -> even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)).bits, 0x3f81);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds up to inf
  EXPECT_EQ(float_to_bfloat16(from_bits(0x00010000u)).bits, 0x0001);             // subnormal, exact
  EXPECT_EQ(bfloat16_to_float(BFloat16{0x4049}), 3.140625f);
}

TEST(BFloat16, NaNStaysNaNWithItsSign) {
  // Payloads only in the low 16 bits must not truncate to infinity.
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xff800001u, 0xffffffffu}) {
    BFloat16 b = float_to_bfloat16(from_bits(u));
    EXPECT_TRUE(is_bf16_nan(b.bits)) << std::hex << u << " -> " << b.bits;
    EXPECT_EQ(b.bits >> 15, u >> 31);
  }
}

TEST(BFloat16, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = bfloat16_to_float(BFloat16{bits});
    if (is_bf16_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(is_bf16_nan(float_to_bfloat16(f).bits)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), bf16_value(bits)) << std::hex << b;
    ASSERT_EQ(float_to_bfloat16(f).bits, bits) << std::hex << b;
  }
}

TEST(BFloat16, MidpointsRoundToEven) {
  for (uint16_t h = 0; h < 0x7f7f; ++h) {
    float mid = static_cast<float>((bf16_value(h) + bf16_value(h + 1)) / 2);
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_bfloat16(mid).bits, even) << std::hex << h;
    ASSERT_EQ(float_to_bfloat16(std::nextafter(mid, std::numeric_limits<float>::infinity())).bits, h + 1) << std::hex << h;
    ASSERT_EQ(float_to_bfloat16(std::nextafter(mid, 0.0f)).bits, h) << std::hex << h;
  }
}

TEST(BFloat16, RandomFloatsMatchCorrectRounding) {
  std::mt19937 rng(777);
  for (int i = 0; i < 200000; ++i) {
    float f = from_bits(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16(f).bits, reference_to_bf16(f)) << f;
  }
}

}  // namespace
}  // namespace weft
