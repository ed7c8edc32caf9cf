// Products from several threads at once through gemm_rows (the parallel executor and user threads
// do this): every result right, and OpenBLAS's process-wide thread count left as it was.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace weft::cpu {
namespace {

struct Product {
  GemmArgs g;
  std::vector<double> a, b;  // stored as op() expects: transposed where g says
  std::vector<double> want;  // C, in double
};

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

Product make_product(int64_t m, int64_t n, int64_t k, bool ta, bool tb, uint32_t seed) {
  Product p;
  p.g = GemmArgs{m, n, k, ta, tb, ta ? m : k, tb ? k : n, n};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  p.a.resize(static_cast<size_t>(m * k));
  p.b.resize(static_cast<size_t>(k * n));
  // Values that float holds exactly, so that one reference serves both dtypes.
  for (double& x : p.a) x = static_cast<float>(dist(rng));
  for (double& x : p.b) x = static_cast<float>(dist(rng));
  p.want.assign(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) {
      const double av = p.a[static_cast<size_t>(ta ? q * m + i : i * k + q)];
      for (int64_t j = 0; j < n; ++j) p.want[static_cast<size_t>(i * n + j)] += av * p.b[static_cast<size_t>(tb ? j * k + q : q * n + j)];
    }
  return p;
}

template <class T>
int count_wrong(const Product& p, const std::vector<T>& c) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  int wrong = 0;
  for (size_t i = 0; i < c.size(); ++i)
    wrong += !(std::abs(static_cast<double>(c[i]) - p.want[i]) <= tol * (1 + std::abs(p.want[i])));
  return wrong;
}

TEST(GemmThreads, ConcurrentProductsAreRightAndLeaveOpenBlasAlone) {
  // Shapes that tile by rows (tall, the old split-by-rows path), by columns (few rows), both,
  // and ones too small to split; transposes and both dtypes.
  const std::vector<Product> products = {
      make_product(2304, 48, 96, false, false, 1), make_product(2100, 64, 40, true, false, 2),
      make_product(24, 700, 160, false, true, 3),  make_product(300, 260, 200, true, true, 4),
      make_product(40, 30, 20, false, false, 5),   make_product(1024, 40, 64, false, true, 6),
  };
  // Four threads, so that products are tiled whatever the machine's core count.
  ThreadPool pool(4);
  // weft sets OpenBLAS's thread count once, at registration or at its first CBLAS product (the
  // first product here may go to weft's own GEMM instead).
  use_single_threaded_blas();
  const int before = openblas_get_num_threads();
  constexpr int kThreads = 6, kRounds = 12;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const Product& p = products[static_cast<size_t>(t + r) % products.size()];
        // Half of the threads on the shared pool, the others on the device's.
        ThreadPool& on = t % 2 ? pool : cpu_device()->pool();
        if ((t + r) % 3 == 0) {
          const auto a = as<double>(p.a), b = as<double>(p.b);
          std::vector<double> c(p.want.size(), std::nan(""));
          gemm_rows<double>(on, p.g, a.data(), b.data(), c.data());
          wrong[static_cast<size_t>(t)] += count_wrong(p, c);
        } else {
          const auto a = as<float>(p.a), b = as<float>(p.b);
          std::vector<float> c(p.want.size(), std::nanf(""));
          gemm_rows<float>(on, p.g, a.data(), b.data(), c.data());
          wrong[static_cast<size_t>(t)] += count_wrong(p, c);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(openblas_get_num_threads(), before);
}

// The tiling: as many tiles as threads where the work allows, none below the minimum work, edges
// on the alignments, and the grid that packs least.
TEST(GemmThreads, TilingFollowsShapeAndThreads) {
  auto tiling = [](int64_t m, int64_t n, int64_t k, int threads) {
    const GemmTiling t = gemm_tiling(GemmArgs{m, n, k, false, false, k, n, n}, threads);
    return std::to_string(t.rows) + "x" + std::to_string(t.cols);
  };
  EXPECT_EQ(tiling(2048, 2048, 2048, 1), "1x1");
  EXPECT_EQ(tiling(2048, 64, 784, 2), "2x1");   // tall: rows
  EXPECT_EQ(tiling(16, 4096, 1024, 2), "1x2");  // wide: columns
  EXPECT_EQ(tiling(2048, 2048, 2048, 4), "2x2");
  EXPECT_EQ(tiling(60, 10, 100, 16), "1x1");    // too little work
  EXPECT_EQ(tiling(8, 16, 4096, 8), "1x1");     // too few rows and columns to cut
  EXPECT_EQ(tiling(4096, 8, 4096, 6), "6x1");
  EXPECT_EQ(tiling(20, 4096, 4096, 6), "1x6");  // 20 rows hold only two tiles of 8
  for (int64_t parts : {2, 3, 7}) {
    int64_t prev = 0;
    for (int64_t i = 1; i <= parts; ++i) {
      const int64_t e = tile_edge(i, parts, 100, 8);
      EXPECT_GT(e, prev) << parts;
      EXPECT_TRUE(e == 100 || e % 8 == 0) << e;
      prev = e;
    }
  }
}

}  // namespace
}  // namespace weft::cpu
