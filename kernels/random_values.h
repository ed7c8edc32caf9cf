// The numbers of one Philox block (kernels/philox.h), as RandomUniform and RandomNormal make them:
// four float32 or two float64 values. One implementation for every device, compiled for the CPU
// and by nvcc for the GPU, so a seed gives the same numbers, bit for bit, wherever it is drawn.
//
// Bit-identical needs identical arithmetic. Every double operation below goes through rn_add,
// rn_mul and rn_div: plain operators on the host (the CPU build, without -mfma, never fuses a
// multiply and an add), the round-to-nearest intrinsics on the GPU (nvcc would otherwise contract
// a * b + c into one FMA, rounded once). sqrt is correctly rounded on both. Box-Muller also needs
// a logarithm, a sine and a cosine, whose last bits differ between glibc and CUDA's math library,
// so they are computed here from those operations alone (log_unit, sincos_turns): accurate to a
// few ulps of double, the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/philox.h"

namespace weft {

namespace random_detail {

WEFT_HOST_DEVICE inline double rn_add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
WEFT_HOST_DEVICE inline double rn_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
WEFT_HOST_DEVICE inline double rn_div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// c0 + s * (c1 + s * (...)), each step rounded separately. (Arguments, not an array: a constant
// array would need to live in device memory for the GPU.)
WEFT_HOST_DEVICE inline double horner(double /*s*/, double c0) { return c0; }
template <class... Rest>
WEFT_HOST_DEVICE inline double horner(double s, double c0, Rest... rest) {
  return rn_add(c0, rn_mul(s, horner(s, rest...)));
}

}  // namespace random_detail

// log(x) for 0 < x <= 1 (normal doubles: the smallest draw is 2^-53). x = 2^k m with m in
// [sqrt(1/2), sqrt(2)); log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716, by its series
// to f^23; k log 2 in two parts, the first exact for any k here.
WEFT_HOST_DEVICE inline double log_unit(double x) {
  using namespace random_detail;
  int k = 0;
  double m = frexp(x, &k);  // m in [0.5, 1), exact
  if (m < 0.70710678118654752440) {
    m = rn_mul(m, 2.0);  // exact
    --k;
  }
  const double f = rn_div(rn_add(m, -1.0), rn_add(m, 1.0));  // m - 1 is exact (Sterbenz)
  const double s = rn_mul(f, f);
  // 2 atanh(f) = 2f + f s (2/3 + 2/5 s + 2/7 s^2 + ...)
  const double series = horner(s, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13, 2.0 / 15, 2.0 / 17,
                               2.0 / 19, 2.0 / 21, 2.0 / 23);
  const double log_m = rn_add(rn_mul(2.0, f), rn_mul(rn_mul(f, s), series));
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3FE62E42FEE00000: k * hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double kd = static_cast<double>(k);
  return rn_add(rn_mul(kd, kLn2Hi), rn_add(rn_mul(kd, kLn2Lo), log_m));
}

// sin(2 pi u) and cos(2 pi u) for 0 <= u < 1 (the angle in turns, as Box-Muller draws it). The
// nearest quarter turn q is split off exactly (u and q/4 are multiples of 2^-53 apart by at most
// 1/8), the rest, |t| <= pi/4, goes through the Taylor series to t^21.
WEFT_HOST_DEVICE inline void sincos_turns(double u, double* sin_out, double* cos_out) {
  using namespace random_detail;
  const double q = floor(rn_add(rn_mul(u, 4.0), 0.5));  // 0..4, exact
  const double t = rn_mul(rn_add(u, rn_mul(q, -0.25)), 6.283185307179586476925286766559);
  const double t2 = rn_mul(t, t);
  // sin t = t + t^3 (-1/3! + t^2/5! - ...); cos t = 1 - t^2/2 + t^4 (1/4! - t^2/6! + ...)
  const double sin_series = horner(t2, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                                   1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0,
                                   -1.0 / 121645100408832000.0);
  const double cos_series = horner(t2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600,
                                   -1.0 / 87178291200.0, 1.0 / 20922789888000.0, -1.0 / 6402373705728000.0,
                                   1.0 / 2432902008176640000.0);
  const double s = rn_add(t, rn_mul(rn_mul(t, t2), sin_series));
  const double c = rn_add(rn_add(1.0, rn_mul(t2, -0.5)), rn_mul(rn_mul(t2, t2), cos_series));
  switch (static_cast<int>(q) & 3) {
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
  }
}

// The values of block `x`: uniform in [a, b) (a + (b - a) u; the caller keeps a rounding that
// lands on b inside the range), or normal with mean a and standard deviation b (Box-Muller: a
// pair from two words for float32, from four for float64).
template <class T>
WEFT_HOST_DEVICE inline void philox_block_values(const uint32_t (&x)[4], bool normal, double a, double b, T* vals) {
  using namespace random_detail;
  if constexpr (sizeof(T) == sizeof(float)) {
    if (normal) {
      for (int p = 0; p < 2; ++p) {
        const double r = sqrt(rn_mul(-2.0, log_unit(unit_float_open0(x[2 * p]))));
        double s = 0, c = 0;
        sincos_turns(unit_float(x[2 * p + 1]), &s, &c);
        vals[2 * p] = static_cast<T>(rn_add(a, rn_mul(b, rn_mul(r, c))));
        vals[2 * p + 1] = static_cast<T>(rn_add(a, rn_mul(b, rn_mul(r, s))));
      }
    } else {
      const double width = rn_add(b, -a);
      for (int p = 0; p < 4; ++p) vals[p] = static_cast<T>(rn_add(a, rn_mul(width, unit_float(x[p]))));
    }
  } else {
    if (normal) {
      const double r = sqrt(rn_mul(-2.0, log_unit(unit_double_open0(x[0], x[1]))));
      double s = 0, c = 0;
      sincos_turns(unit_double(x[2], x[3]), &s, &c);
      const double br = rn_mul(b, r);
      vals[0] = rn_add(a, rn_mul(br, c));
      vals[1] = rn_add(a, rn_mul(br, s));
    } else {
      const double width = rn_add(b, -a);
      vals[0] = rn_add(a, rn_mul(width, unit_double(x[0], x[1])));
      vals[1] = rn_add(a, rn_mul(width, unit_double(x[2], x[3])));
    }
  }
}

}  // namespace weft
