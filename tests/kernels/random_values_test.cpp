// kernels/random_values.h: the logarithm, sine and cosine that every device computes alike are
// accurate, and the normal draws built on them have the right distribution.
#include "kernels/random_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace weft {
namespace {

double ulp_of(double x) { return std::nextafter(std::fabs(x), INFINITY) - std::fabs(x); }

// Against long double's logl (64-bit mantissa) over the draws' whole range: the extremes, the
// halves where the reduction switches, and random values of 53 and 24 bits.
TEST(RandomValues, LogUnitIsWithinTwoUlps) {
  std::vector<double> xs = {1.0, 0.5, std::ldexp(1.0, -53), std::ldexp(1.0, -24), 0.70710678118654752440,
                            std::nextafter(0.70710678118654752440, 1.0), std::nextafter(1.0, 0.0), 0.75, 0.999};
  const Philox4x32 gen(12345);
  for (uint64_t b = 0; b < 20000; ++b) {
    const auto w = gen(b);
    xs.push_back(unit_double_open0(w[0], w[1]));
    xs.push_back(unit_float_open0(w[2]));
  }
  for (double x : xs) {
    const long double want = std::log(static_cast<long double>(x));
    const double got = log_unit(x);
    const double err = std::fabs(static_cast<double>(static_cast<long double>(got) - want));
    ASSERT_LE(err, 2 * ulp_of(static_cast<double>(want)) + 1e-300) << "log(" << x << ") = " << got;
  }
}

// sin and cos of 2 pi u against long double's, over [0, 1): the quarter turns (where the reduction
// switches quadrant), their neighbours, and random 53- and 24-bit turns. Within two ulps of 1
// (the functions' scale) in absolute terms, and within four ulps of the value where it is not
// tiny (near a zero, the rounding of the reduced angle dominates).
TEST(RandomValues, SinCosTurnsAreAccurate) {
  std::vector<double> us = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, std::nextafter(1.0, 0.0),
                            std::nextafter(0.25, 0.0), std::nextafter(0.25, 1.0), std::ldexp(1.0, -53)};
  const Philox4x32 gen(777);
  for (uint64_t b = 0; b < 20000; ++b) {
    const auto w = gen(b);
    us.push_back(unit_double(w[0], w[1]));
    us.push_back(unit_float(w[2]));
  }
  const long double two_pi = 6.28318530717958647692528676655900577L;
  for (double u : us) {
    double s = 0, c = 0;
    sincos_turns(u, &s, &c);
    const long double ws = std::sin(two_pi * u), wc = std::cos(two_pi * u);
    for (auto [got, want, name] : {std::tuple{s, ws, "sin"}, std::tuple{c, wc, "cos"}}) {
      const double err = std::fabs(static_cast<double>(static_cast<long double>(got) - want));
      ASSERT_LE(err, 2 * ulp_of(1.0)) << name << "(2 pi " << u << ") = " << got;
      if (std::fabs(static_cast<double>(want)) > 1e-3) {
        ASSERT_LE(err, 4 * ulp_of(static_cast<double>(want))) << name << "(2 pi " << u << ")";
      }
    }
  }
}

// A million normal draws of each type: mean, variance, and the tails a standard normal has.
TEST(RandomValues, NormalDrawsAreStandardNormal) {
  const Philox4x32 gen(2024);
  for (bool is_float : {true, false}) {
    double sum = 0, sum2 = 0;
    int64_t n = 0, beyond2 = 0;
    for (uint64_t b = 0; b < 250000; ++b) {
      const auto w = gen(b);
      const uint32_t x[4] = {w[0], w[1], w[2], w[3]};
      double v[4];
      int count = 0;
      if (is_float) {
        float f[4];
        philox_block_values(x, true, 0.0, 1.0, f);
        for (int i = 0; i < 4; ++i) v[i] = f[i];
        count = 4;
      } else {
        philox_block_values(x, true, 0.0, 1.0, v);
        count = 2;
      }
      for (int i = 0; i < count; ++i) {
        ASSERT_TRUE(std::isfinite(v[i]));
        sum += v[i];
        sum2 += v[i] * v[i];
        beyond2 += std::fabs(v[i]) > 2;
        ++n;
      }
    }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(static_cast<double>(n))) << (is_float ? "float32" : "float64");
    EXPECT_NEAR(var, 1.0, 0.01) << (is_float ? "float32" : "float64");
    EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 0.002) << (is_float ? "float32" : "float64");
  }
}

}  // namespace
}  // namespace weft
