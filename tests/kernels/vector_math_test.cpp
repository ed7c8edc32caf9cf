// weft's float32 transcendentals (kernels/cpu/vector_math.h): their error against float64 libm
// over a dense sample of every binade stays within the bounds the header documents; special values
// follow libm; and every instruction-set variant this CPU has gives the scalar variant's bits, at
// every array length (tails padded to a vector) and in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"

namespace weft::cpu {
namespace {

struct Function {
  const char* name;
  UnaryMath op;
  FloatArrayFn VectorMathTable::*entry;
  double (*reference)(double);
  double max_ulps;  // the bound vector_math.h documents
};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const Function kFunctions[] = {
    {"exp", UnaryMath::kExp, &VectorMathTable::exp, [](double x) { return std::exp(x); }, 1.5},
    {"log", UnaryMath::kLog, &VectorMathTable::log, [](double x) { return std::log(x); }, 1.5},
    {"tanh", UnaryMath::kTanh, &VectorMathTable::tanh, [](double x) { return std::tanh(x); }, 2.0},
    {"sigmoid", UnaryMath::kSigmoid, &VectorMathTable::sigmoid, sigmoid_ref, 3.0},
    {"erf", UnaryMath::kErf, &VectorMathTable::erf, [](double x) { return std::erf(x); }, 1.5},
};

// Every 4099th bit pattern (a prime stride, so every mantissa region is hit), both signs, with
// the infinities, NaN, zeros and the extremes of the float range added.
std::vector<float> sample() {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (!std::isnan(x)) xs.push_back(x);
  }
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 88.7228394f, 88.72284f, -87.33654f, -103.9720840f, 0.625f,
                  -0.625f, 1.0f, -1.0f, 3.92f, 4.0f, 1e-30f, -1e-30f})
    xs.push_back(v);
  return xs;
}

// The distance between `y` and the exact value r in units of the float spacing at r.
double ulps(float y, double r) {
  const float rf = static_cast<float>(r);
  if (std::isinf(rf) || std::isinf(y)) return y == rf ? 0.0 : std::numeric_limits<double>::infinity();
  int e = 0;
  std::frexp(r, &e);  // |r| in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 1, -126) - 23);
  return std::abs(static_cast<double>(y) - r) / spacing;
}

TEST(VectorMath, ErrorAgainstFloat64IsWithinTheDocumentedBound) {
  const std::vector<float> xs = sample();
  std::vector<float> ys(xs.size());
  for (const Function& f : kFunctions) {
    unary_math(f.op, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double r = f.reference(static_cast<double>(xs[i]));
      if (std::isnan(r)) {
        EXPECT_TRUE(std::isnan(ys[i])) << f.name << "(" << xs[i] << ") = " << ys[i] << ", not NaN";
        continue;
      }
      const double e = ulps(ys[i], r);
      if (e > worst) worst = e, worst_x = xs[i];
    }
    EXPECT_LE(worst, f.max_ulps) << f.name << ": " << worst << " ulps at x = " << worst_x;
    std::printf("%-8s max error %.3f ulps (at %.9g) on %s\n", f.name, worst, static_cast<double>(worst_x),
                vector_isa_name(vector_math_isa()));
  }
}

TEST(VectorMath, SpecialValuesFollowLibm) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto at = [](UnaryMath op, float x) {
    float y = 0;
    unary_math(op, &x, &y, 1);
    return y;
  };
  EXPECT_EQ(at(UnaryMath::kExp, inf), inf);
  EXPECT_EQ(at(UnaryMath::kExp, -inf), 0.0f);
  EXPECT_EQ(at(UnaryMath::kExp, 0.0f), 1.0f);
  EXPECT_EQ(at(UnaryMath::kExp, 89.0f), inf);
  EXPECT_EQ(at(UnaryMath::kExp, -104.0f), 0.0f);
  for (float below : {-104.5f, -1e30f, -inf})  // computed as e^0 and zeroed (no underflow): +0
    EXPECT_EQ(std::bit_cast<uint32_t>(at(UnaryMath::kExp, below)), 0u) << below;
  EXPECT_GT(at(UnaryMath::kExp, -100.0f), 0.0f);  // subnormal, not flushed
  EXPECT_EQ(at(UnaryMath::kLog, 1.0f), 0.0f);
  EXPECT_EQ(at(UnaryMath::kLog, 0.0f), -inf);
  EXPECT_EQ(at(UnaryMath::kLog, -0.0f), -inf);
  EXPECT_EQ(at(UnaryMath::kLog, inf), inf);
  EXPECT_TRUE(std::isnan(at(UnaryMath::kLog, -1.0f)));
  EXPECT_TRUE(std::isnan(at(UnaryMath::kLog, -inf)));
  EXPECT_EQ(at(UnaryMath::kTanh, inf), 1.0f);
  EXPECT_EQ(at(UnaryMath::kTanh, -inf), -1.0f);
  EXPECT_EQ(at(UnaryMath::kTanh, 20.0f), 1.0f);
  EXPECT_TRUE(std::signbit(at(UnaryMath::kTanh, -0.0f)));
  EXPECT_EQ(at(UnaryMath::kSigmoid, inf), 1.0f);
  EXPECT_EQ(at(UnaryMath::kSigmoid, -inf), 0.0f);
  EXPECT_EQ(at(UnaryMath::kSigmoid, 0.0f), 0.5f);
  EXPECT_EQ(at(UnaryMath::kErf, inf), 1.0f);
  EXPECT_EQ(at(UnaryMath::kErf, -inf), -1.0f);
  EXPECT_EQ(at(UnaryMath::kErf, 5.0f), 1.0f);
  EXPECT_TRUE(std::signbit(at(UnaryMath::kErf, -0.0f)));
  for (const Function& f : kFunctions) EXPECT_TRUE(std::isnan(at(f.op, nan))) << f.name;
}

TEST(VectorMath, EveryInstructionSetGivesTheScalarBits) {
  const VectorMathTable* scalar = vector_math_table(VectorIsa::kScalar);
  ASSERT_NE(scalar, nullptr);
  std::vector<float> xs = sample();
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  const auto n = static_cast<int64_t>(xs.size());
  int variants = 0;
  for (VectorIsa isa : {VectorIsa::kAvx2, VectorIsa::kAvx512}) {
    const VectorMathTable* table = vector_math_table(isa);
    if (!table) continue;  // this CPU lacks it
    ++variants;
    for (const Function& f : kFunctions) {
      std::vector<float> want(xs.size()), got(xs.size());
      (scalar->*f.entry)(xs.data(), want.data(), n);
      (table->*f.entry)(xs.data(), got.data(), n);
      for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << f.name << " on " << vector_isa_name(isa) << " at x = " << xs[i];
      // Every length from 0 to 40 at an odd offset, and in place: the tail elements get the same
      // bits as the body's.
      for (int64_t len = 0; len <= 40; ++len) {
        std::vector<float> part(xs.begin() + 3, xs.begin() + 3 + len);
        (table->*f.entry)(part.data(), part.data(), len);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(part[i]), std::bit_cast<uint32_t>(want[3 + i]))
              << f.name << " on " << vector_isa_name(isa) << ", length " << len << ", element " << i;
      }
    }
  }
  std::printf("compared %d vector variant(s) with the scalar one\n", variants);
}

// gelu is its composition, (x * 0.5) * (erf(x * sqrt(1/2)) + 1), on every instruction set: the

// exp, tanh and sigmoid take a shorter path for a vector whose lanes all keep e^x normal (exp's
// argument in [-86, 88]) and the general one otherwise; both must give the same bits. A vector
// variant runs the values alone (every vector on the short path) and again with every eighth
// element out of range (every vector of 8 or 16 lanes on the general path); the scalar variant,
// one lane at a time, takes the short path for each of these values.
TEST(VectorMath, TheInRangePathGivesTheGeneralPathsBits) {
  struct ShortPath {
    UnaryMath op;
    float lo, hi;  // the short path's range, ends included
  };
  const ShortPath paths[] = {{UnaryMath::kExp, -86.0f, 88.0f}, {UnaryMath::kTanh, -44.0f, 44.0f},
                             {UnaryMath::kSigmoid, -88.0f, 86.0f}};
  const VectorMathTable* scalar = vector_math_table(VectorIsa::kScalar);
  int compared = 0;
  for (const ShortPath& path : paths) {
    const Function& f = *std::find_if(std::begin(kFunctions), std::end(kFunctions),
                                      [&](const Function& g) { return g.op == path.op; });
    std::vector<float> inside;
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) {
      const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
      if (x >= path.lo && x <= path.hi) inside.push_back(x);
    }
    for (float v : {path.lo, path.hi, std::nextafter(path.lo, 0.0f), std::nextafter(path.hi, 0.0f), 0.0f, -0.0f})
      inside.push_back(v);
    std::vector<float> mixed;  // 7 values, then one that forces the general path
    for (size_t i = 0; i < inside.size(); ++i) {
      mixed.push_back(inside[i]);
      if (i % 7 == 6) mixed.push_back(i % 14 == 6 ? 100.0f : -1e30f);  // outside every short range
    }
    std::vector<float> one_lane(inside.size());
    (scalar->*f.entry)(inside.data(), one_lane.data(), static_cast<int64_t>(inside.size()));
    for (VectorIsa isa : {VectorIsa::kAvx2, VectorIsa::kAvx512}) {
      const VectorMathTable* table = vector_math_table(isa);
      if (!table) continue;
      std::vector<float> alone(inside.size()), general(mixed.size());
      (table->*f.entry)(inside.data(), alone.data(), static_cast<int64_t>(inside.size()));
      (table->*f.entry)(mixed.data(), general.data(), static_cast<int64_t>(mixed.size()));
      for (size_t i = 0, j = 0; i < inside.size(); ++i, ++j) {
        if (j % 8 == 7) ++j;  // the out-of-range companion
        ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(general[j]))
            << f.name << " on " << vector_isa_name(isa) << " at x = " << inside[i];
        ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(one_lane[i]))
            << f.name << " on " << vector_isa_name(isa) << " at x = " << inside[i];
      }
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}
// bits of the same table's erf and the float operations, and the scalar variant's bits.
TEST(VectorMath, GeluIsItsCompositionOnEveryInstructionSet) {
  std::vector<float> xs = sample();
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  const auto n = static_cast<int64_t>(xs.size());
  const VectorMathTable* scalar = vector_math_table(VectorIsa::kScalar);
  std::vector<float> scalar_gelu(xs.size());
  scalar->gelu(xs.data(), scalar_gelu.data(), n);
  for (VectorIsa isa : {VectorIsa::kScalar, VectorIsa::kAvx2, VectorIsa::kAvx512}) {
    const VectorMathTable* table = vector_math_table(isa);
    if (!table) continue;
    std::vector<float> scaled(xs.size()), e(xs.size()), got(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) scaled[i] = xs[i] * 0.7071067811865476f;
    table->erf(scaled.data(), e.data(), n);
    table->gelu(xs.data(), got.data(), n);
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = (xs[i] * 0.5f) * (e[i] + 1.0f);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << vector_isa_name(isa) << " at x = " << xs[i];
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(scalar_gelu[i])) << vector_isa_name(isa) << " at x = " << xs[i];
    }
  }
}

// Softmax rows in one pass are the separate steps nn.cpp takes on longer rows, on every instruction
// set: m = max_run, d = x - m, e = exp(d), s = sum_run(e) in double, then e * float(1 / s) or, for
// the log, d - float(log(s)). Every length 1 to 256, several rows per call (and in place), values
// whose exponentials underflow through the subnormals, and rows with NaN, infinities and only -inf.
TEST(VectorMath, SoftmaxRowsAreTheSeparateStepsOnEveryInstructionSet) {
  const VectorMathTable* scalar = vector_math_table(VectorIsa::kScalar);
  std::mt19937 rng(7);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](float a, float b) { return (a != a && b != b) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); };
  int compared = 0;
  for (int64_t n = 1; n <= kSoftmaxRowsMax; ++n) {
    const int64_t rows = 6;
    std::vector<float> x(static_cast<size_t>(rows * n));
    std::uniform_real_distribution<float> wide(-120.0f, 20.0f), narrow(-3.0f, 3.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) x[r * n + j] = r % 2 ? wide(rng) : narrow(rng);
    x[2 * n + (n - 1)] = nan;                         // row 2: a NaN, last
    x[3 * n + n / 2] = inf;                           // row 3: +inf
    for (int64_t j = 0; j < n; ++j) x[4 * n + j] = -inf;  // row 4: every element -inf
    x[5 * n] = -inf;                                  // row 5: one -inf among numbers
    for (bool log : {false, true}) {
      // The separate steps, with the scalar table's exp.
      std::vector<float> want(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * n;
        std::vector<float> d(static_cast<size_t>(n)), e(static_cast<size_t>(n));
        const float m = max_run(xr, n);
        for (int64_t j = 0; j < n; ++j) d[j] = xr[j] - m;
        scalar->exp(d.data(), e.data(), n);
        const double sum = static_cast<double>(sum_run(e.data(), n));
        for (int64_t j = 0; j < n; ++j)
          want[r * n + j] = log ? d[j] - static_cast<float>(std::log(sum)) : e[j] * static_cast<float>(1.0 / sum);
      }
      for (VectorIsa isa : {VectorIsa::kScalar, VectorIsa::kAvx2, VectorIsa::kAvx512}) {
        const VectorMathTable* table = vector_math_table(isa);
        if (!table) continue;
        std::vector<float> got = x;  // in place
        (log ? table->log_softmax : table->softmax)(got.data(), got.data(), rows, n);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_TRUE(same(got[i], want[i])) << (log ? "log_softmax" : "softmax") << " on " << vector_isa_name(isa)
                                             << ", n " << n << ", row " << i / n << ", element " << i % n << ": got "
                                             << got[i] << ", want " << want[i];
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 2 * 256);
}

// A longer row's steps (nn.cpp's softmax_row and softmax_long_rows call them), vectorised, are the
// loops they replace on every instruction set: row_max is max_run's value; exp_shifted_sum stores
// x - m or exp(x - m) and returns the chunks' sum_run sums added in double; finish_row scales or
// subtracts. Lengths around the leaf (256) and the chunk (1024), rows with NaN and infinities.
TEST(VectorMath, LongRowStepsAreTheLoopsTheyReplaceOnEveryInstructionSet) {
  const VectorMathTable* scalar = vector_math_table(VectorIsa::kScalar);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-120.0f, 20.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](float a, float b) { return (a != a && b != b) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); };
  int compared = 0;
  for (int64_t n : {257, 300, 513, 1000, 1024, 1025, 2047, 3000, 5003}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = wide(rng);
      if (kind == 1) x[static_cast<size_t>(n / 3)] = nan;
      if (kind == 2) x[static_cast<size_t>(n - 1)] = inf;
      if (kind == 3) x[0] = -inf;
      const float m = max_run(x.data(), n);
      for (bool log : {false, true}) {
        std::vector<float> want(x.size());
        double want_sum = 0;
        for (int64_t j0 = 0; j0 < n; j0 += kSoftmaxChunk) {
          const int64_t c = std::min(kSoftmaxChunk, n - j0);
          std::vector<float> d(static_cast<size_t>(c)), e(static_cast<size_t>(c));
          for (int64_t j = 0; j < c; ++j) d[j] = x[j0 + j] - m;
          scalar->exp(d.data(), e.data(), c);
          want_sum += static_cast<double>(sum_run(e.data(), c));
          for (int64_t j = 0; j < c; ++j) want[j0 + j] = log ? d[j] : e[j];
        }
        const float f = log ? 0.75f : 1.0f / 3.0f;
        std::vector<float> finished = want;
        for (float& v : finished) v = log ? v - f : v * f;
        for (VectorIsa isa : {VectorIsa::kScalar, VectorIsa::kAvx2, VectorIsa::kAvx512}) {
          const VectorMathTable* table = vector_math_table(isa);
          if (!table) continue;
          const std::string where = std::string(vector_isa_name(isa)) + ", n " + std::to_string(n) + ", kind " +
                                    std::to_string(kind) + (log ? ", log" : "");
          const float got_m = table->max(x.data(), n);
          ASSERT_TRUE(got_m == m || (got_m != got_m && m != m)) << where << ": max " << got_m << ", want " << m;
          std::vector<float> got = x;  // in place
          const double sum = (log ? table->log_exp_sum : table->exp_sum)(got.data(), got.data(), n, m);
          ASSERT_TRUE(sum == want_sum || (sum != sum && want_sum != want_sum)) << where << ": sum " << sum << ", want " << want_sum;
          for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(same(got[j], want[j])) << where << ", element " << j;
          (log ? table->subtract : table->scale)(got.data(), n, f);
          for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(same(got[j], finished[j])) << where << ", finished element " << j;
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, 9 * 4 * 2);
}

TEST(VectorMath, Float64IsLibm) {
  const std::vector<double> xs = {-3.5, -0.25, 0.0, 0.5, 2.0, 30.0};
  std::vector<double> ys(xs.size());
  unary_math(UnaryMath::kErf, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(ys[i], std::erf(xs[i]));
  unary_math(UnaryMath::kSigmoid, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(ys[i], sigmoid_ref(xs[i]), 1e-16);
}

}  // namespace
}  // namespace weft::cpu
