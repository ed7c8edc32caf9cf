// Reference float16 / bfloat16 arithmetic for tests, from first principles: a value is computed
// with ldexp from the bit fields, and round-to-nearest-even is decided by comparing the exact
// distances (in double; they are exact there) to the two neighbouring representable values.
// Nothing here reuses the bit tricks of runtime/half.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace weft::ref {

// The exact value of a binary16 bit pattern (NaN for NaNs).
inline double half_value(uint16_t bits) {
  int exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(mant, -24);
  else v = std::ldexp(1024 + mant, exp - 25);
  return (bits >> 15) ? -v : v;
}

inline double bf16_value(uint16_t bits) {
  int exp = (bits >> 7) & 0xff, mant = bits & 0x7f;
  double v;
  if (exp == 0xff) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(mant, -133);
  else v = std::ldexp(128 + mant, exp - 134);
  return (bits >> 15) ? -v : v;
}

inline bool is_half_nan(uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0; }
inline bool is_bf16_nan(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0; }

namespace detail {
// Ties go to the candidate whose last mantissa bit is even.
inline uint16_t nearest(double x, uint16_t lo, double lo_v, uint16_t hi, double hi_v) {
  double dl = x - lo_v, dh = hi_v - x;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

// Correct rounding of x to a 16-bit format whose positive finite patterns 0..max_finite grow with
// their value; `overflow_v` is where the pattern after max_finite (infinity) would sit if the
// exponent kept going. NaN maps to `nan_bits`.
template <class ValueOf>
uint16_t round_to_format(double x, ValueOf value, uint16_t max_finite, double overflow_v, uint16_t inf_bits,
                         uint16_t nan_bits) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | nan_bits;
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | inf_bits;
  uint16_t lo = 0;  // the largest finite pattern whose value is <= a
  for (int step = 1 << 15; step; step >>= 1)
    if (lo + step <= max_finite && value(static_cast<uint16_t>(lo + step)) <= a) lo = static_cast<uint16_t>(lo + step);
  double hi_v = lo == max_finite ? overflow_v : value(static_cast<uint16_t>(lo + 1));
  if (a >= hi_v) return sign | inf_bits;
  return sign | nearest(a, lo, value(lo), static_cast<uint16_t>(lo + 1), hi_v);
}
}  // namespace detail

// Correctly rounded double -> binary16 bits.
inline uint16_t to_half_bits(double x) {
  return detail::round_to_format(x, half_value, 0x7bff, 65536.0, 0x7c00, 0x7e00);
}
// Correctly rounded double -> bfloat16 bits.
inline uint16_t to_bf16_bits(double x) {
  return detail::round_to_format(x, bf16_value, 0x7f7f, std::ldexp(1.0, 128), 0x7f80, 0x7fc0);
}

}  // namespace weft::ref
