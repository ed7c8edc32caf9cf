// weft's own GEMM (kernels/cpu/sgemm.h, its AVX2 or AVX-512 variant, whichever this CPU runs)
// against a plain triple loop in double: every
// combination of transposes, shapes that leave partial tiles in both directions, K split into
// several blocks, operands with padded leading dimensions (including the 4 KiB strides that make
// it pack A instead of reading it in place), the fused bias and relu, and bitwise equality
// between one and two threads and between the fused epilogue and the unfused ops; and bitwise
// equality with the order of operations sgemm_driver.h documents, which is what makes the
// variants agree with each other; and the ReluGrad epilogue on every variant this CPU can run.
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/sgemm_driver.h"
#include "kernels/cpu/sgemm_isa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

namespace weft::cpu {
namespace {

struct Problem {
  GemmArgs g;
  std::vector<float> a, b, bias;
};

// op(A) is m x k and op(B) is k x n; stored operands get `pad` extra columns.
Problem make_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t pad, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Problem p;
  const int64_t a_rows = ta ? k : m, a_cols = (ta ? m : k) + pad;
  const int64_t b_rows = tb ? n : k, b_cols = (tb ? k : n) + pad;
  p.g = GemmArgs{m, n, k, ta, tb, a_cols, b_cols, n};
  p.a.resize(static_cast<size_t>(a_rows * a_cols));
  p.b.resize(static_cast<size_t>(b_rows * b_cols));
  p.bias.resize(static_cast<size_t>(n));
  for (float& x : p.a) x = dist(rng);
  for (float& x : p.b) x = dist(rng);
  for (float& x : p.bias) x = dist(rng);
  return p;
}

float a_at(const Problem& p, int64_t i, int64_t k) {
  return p.g.ta ? p.a[static_cast<size_t>(k * p.g.lda + i)] : p.a[static_cast<size_t>(i * p.g.lda + k)];
}
float b_at(const Problem& p, int64_t k, int64_t j) {
  return p.g.tb ? p.b[static_cast<size_t>(j * p.g.ldb + k)] : p.b[static_cast<size_t>(k * p.g.ldb + j)];
}

std::vector<float> run(ThreadPool& pool, const Problem& p, const SgemmEpilogue& ep = {}) {
  std::vector<float> c(static_cast<size_t>(p.g.m * p.g.n), std::numeric_limits<float>::quiet_NaN());
  sgemm(pool, p.g, p.a.data(), p.b.data(), c.data(), ep);
  return c;
}

// Checks c against the double-precision product within float rounding of a k-term sum.
void expect_matches_reference(const Problem& p, const std::vector<float>& c, bool with_bias, bool relu) {
  const GemmArgs& g = p.g;
  int reported = 0;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < g.k; ++k) {
        const double t = double(a_at(p, i, k)) * double(b_at(p, k, j));
        sum += t;
        magnitude += std::abs(t);
      }
      if (with_bias) sum += p.bias[static_cast<size_t>(j)];
      if (relu && sum < 0) sum = 0;
      const double got = c[static_cast<size_t>(i * g.n + j)];
      const double tol = 1e-6 * (magnitude + 1) * std::sqrt(double(g.k) + 1);
      if (!(std::abs(got - sum) <= tol) && reported++ < 5)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", want " << sum << " (m=" << g.m << " n=" << g.n
                      << " k=" << g.k << " ta=" << g.ta << " tb=" << g.tb << ")";
    }
  }
}

class Sgemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sgemm_available()) GTEST_SKIP() << "this CPU has neither AVX2 with FMA nor AVX-512F";
  }
  ThreadPool one_{1}, two_{2};
};

TEST_F(Sgemm, MatchesReferenceOverShapesAndTransposes) {
  uint32_t seed = 1;
  for (int64_t m : {1, 13, 14, 15, 24, 29, 61})
    for (int64_t n : {1, 10, 16, 17, 20, 24, 32, 45, 128})
      for (int64_t k : {1, 7, 300})
        for (int t = 0; t < 4; ++t) {
          const Problem p = make_problem(m, n, k, t & 1, t & 2, 0, seed++);
          expect_matches_reference(p, run(one_, p), false, false);
        }
}

TEST_F(Sgemm, SeveralKBlocksAndLargeProducts) {
  // k = 700 spans three K blocks; 600 x 128 and 200 x 130 take both threads and both tile widths;
  // 70 x 1100 is a short, wide product, as general shapes are where this kernel measured faster.
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{600, 128, 700}, {200, 130, 513}, {300, 12, 1000}, {70, 1100, 300}})
    for (int t = 0; t < 4; ++t) {
      const Problem p = make_problem(m, n, k, t & 1, t & 2, 0, uint32_t(100 + t));
      expect_matches_reference(p, run(two_, p), false, false);
    }
}

TEST_F(Sgemm, PaddedLeadingDimensions) {
  // Padding of 3 floats, and of 1024 - 100 floats: rows 4 KiB apart, which A must not be read in
  // place with.
  for (int64_t pad : {int64_t{3}, int64_t{924}})
    for (int t = 0; t < 4; ++t) {
      const Problem p = make_problem(70, 40, 100, t & 1, t & 2, pad, uint32_t(200 + t));
      expect_matches_reference(p, run(two_, p), false, false);
    }
}

TEST_F(Sgemm, BiasAndReluEpilogue) {
  for (bool relu : {false, true})
    for (int64_t n : {10, 20, 33, 128}) {
      const Problem p = make_problem(90, n, 520, false, false, 0, uint32_t(300 + n));
      expect_matches_reference(p, run(two_, p, {p.bias.data(), relu}), true, relu);
    }
}

TEST_F(Sgemm, FusedEpilogueIsBitwiseTheUnfusedOps) {
  const Problem p = make_problem(100, 50, 600, false, true, 0, 7);
  const std::vector<float> fused = run(two_, p, {p.bias.data(), true});
  std::vector<float> unfused = run(two_, p);
  for (int64_t i = 0; i < p.g.m; ++i)
    for (int64_t j = 0; j < p.g.n; ++j) {
      float& x = unfused[static_cast<size_t>(i * p.g.n + j)];
      x = x + p.bias[static_cast<size_t>(j)];
      x = x < 0.f ? 0.f : x;
    }
  EXPECT_EQ(0, std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)));
}

TEST_F(Sgemm, SameBitsOnOneAndTwoThreads) {
  // 333 rows: two threads split the rows of C; 256 rows (19 row panels, 4 column panels, as in an
  // MLP's layers): they split its columns.
  for (int64_t m : {333, 256})
    for (int t = 0; t < 4; ++t) {
      const Problem p = make_problem(m, 128, 784, t & 1, t & 2, 0, uint32_t(400 + t));
      const std::vector<float> c1 = run(one_, p, {p.bias.data(), true}), c2 = run(two_, p, {p.bias.data(), true});
      EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)))
          << "m=" << m << " ta=" << (t & 1) << " tb=" << (t & 2);
    }
}

TEST_F(Sgemm, ReluKeepsNaN) {
  // A row of A that is NaN gives a NaN row of C, which relu must keep, as the Relu kernel does; a
  // row whose products are all negative becomes 0.
  Problem p = make_problem(3, 20, 5, false, false, 0, 9);
  for (int64_t k = 0; k < 5; ++k) p.a[static_cast<size_t>(k)] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t k = 0; k < 5; ++k) p.a[static_cast<size_t>(5 + k)] = 1.f;
  std::fill(p.b.begin(), p.b.end(), -1.f);
  std::vector<float> bias(20, 0.5f);
  const std::vector<float> c = run(one_, p, {bias.data(), true});
  for (int64_t j = 0; j < 20; ++j) {
    EXPECT_TRUE(std::isnan(c[static_cast<size_t>(j)])) << j;
    EXPECT_EQ(c[static_cast<size_t>(20 + j)], 0.f) << j;
  }
}

// The ReluGrad epilogue (FusedMatMul's "relu_grad"): C's element where x > 0, else +0 (x NaN, 0,
// -0 or negative), C's NaN kept where x > 0; the ReluGrad kernel's `x > 0 ? dy : 0` on the very
// product the variant computes without it. Every variant this CPU can run (an AVX-512 machine
// runs the AVX2 one too), one and two threads, partial tiles, both tile widths.
TEST_F(Sgemm, ReluGradEpilogueOnEveryVariant) {
  using Variant = void (*)(ThreadPool&, const GemmArgs&, const float*, const float*, float*, const SgemmEpilogue&);
  std::vector<std::pair<const char*, Variant>> variants;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) variants.emplace_back("avx2", sgemm_avx2);
  if (__builtin_cpu_supports("avx512f")) variants.emplace_back("avx512", sgemm_avx512);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 10, 700}, {50, 45, 300}, {256, 128, 128}, {13, 33, 20}})
    for (int t = 0; t < 4; ++t) {
      Problem p = make_problem(m, n, k, t & 1, t & 2, 0, uint32_t(500 + t));
      for (int64_t q = 0; q < k; ++q) p.a[static_cast<size_t>(p.g.ta ? q * p.g.lda : q)] = nan;  // row 0 of C: NaN
      std::vector<float> x = make_problem(m, 1, n, false, false, 0, uint32_t(600 + t)).a;  // m x n, in [-1, 1]
      const float specials[] = {nan, 0.f, -0.f, -1.f, 1.f, std::numeric_limits<float>::denorm_min()};
      for (size_t i = 0; i < x.size(); i += 7) x[i] = specials[(i / 7) % 6];
      for (auto [name, variant] : variants)
        for (ThreadPool* pool : {&one_, &two_}) {
          std::vector<float> plain(static_cast<size_t>(m * n)), masked(plain.size());
          variant(*pool, p.g, p.a.data(), p.b.data(), plain.data(), {});
          variant(*pool, p.g, p.a.data(), p.b.data(), masked.data(), {.relu_grad_of = x.data()});
          int reported = 0;
          for (size_t i = 0; i < plain.size(); ++i) {
            const float want = x[i] > 0.f ? plain[i] : 0.f;
            if (std::memcmp(&masked[i], &want, sizeof(float)) != 0 && reported++ < 5)
              ADD_FAILURE() << name << " on " << pool->num_threads() << " thread(s): C[" << i << "] = " << masked[i]
                            << " with x = " << x[i] << ", want " << want << " (m=" << m << " n=" << n << " k=" << k
                            << " ta=" << p.g.ta << " tb=" << p.g.tb << ")";
          }
          EXPECT_TRUE(std::isnan(masked[0]) || !(x[0] > 0.f)) << name;
        }
    }
}

TEST_F(Sgemm, BitsFollowTheDocumentedOrderOnEveryVariant) {
  // Each element: a chain of float FMAs over k in increasing order, restarted per K block of
  // split_k, the blocks added in order, then the bias, then relu. Computed here with std::fma,
  // this is what every variant must give bit for bit, so an AVX2 machine and an AVX-512 machine
  // agree. k = 700 spans three K blocks; the shapes cover both tile widths of both variants.
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{37, 10, 700}, {50, 45, 300}, {1100, 128, 130}, {1680, 20, 10}, {45, 23, 600}})
    for (int t = 0; t < 4; ++t) {
      const Problem p = make_problem(m, n, k, t & 1, t & 2, 0, uint32_t(400 + t));
      const std::vector<float> c = run(two_, p, {p.bias.data(), true});
      const sgemm_detail::KBlocks blocks = sgemm_detail::split_k(k);
      int reported = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float total = 0;
          for (int64_t kb = 0; kb < blocks.count; ++kb) {
            float block = 0;
            for (int64_t q = blocks.begin(kb); q < blocks.begin(kb) + blocks.len(kb, k); ++q)
              block = std::fma(a_at(p, i, q), b_at(p, q, j), block);
            total = kb == 0 ? block : total + block;
          }
          total += p.bias[static_cast<size_t>(j)];
          total = total < 0 ? 0.f : total;
          const float got = c[static_cast<size_t>(i * n + j)];
          if (std::memcmp(&got, &total, sizeof(float)) != 0 && reported++ < 5)
            ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", the documented order gives " << total
                          << " (m=" << m << " n=" << n << " k=" << k << " ta=" << p.g.ta << " tb=" << p.g.tb << ")";
        }
    }
}

}  // namespace
}  // namespace weft::cpu
