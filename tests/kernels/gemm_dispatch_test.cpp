// Which GEMM a float product goes to (kernels/cpu/gemm.h, sgemm_choice.h), and that both give the
// same product through the dispatch that every matmul kernel uses.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sgemm_choice.h"
#include "runtime/error.h"
#include "test_child_process.h"

namespace weft::cpu {
namespace {

// Restores the process's choice whatever the test set.
class ChoiceGuard {
 public:
  ChoiceGuard() : saved_(sgemm_choice()) {}
  ~ChoiceGuard() { set_sgemm_choice(saved_); }

 private:
  SgemmChoice saved_;
};

TEST(SgemmChoice, ParsesTheThreeSettingsAndNamesABadOne) {
  EXPECT_EQ(parse_sgemm_choice("auto"), SgemmChoice::kAuto);
  EXPECT_EQ(parse_sgemm_choice(""), SgemmChoice::kAuto);
  EXPECT_EQ(parse_sgemm_choice("own"), SgemmChoice::kOwn);
  EXPECT_EQ(parse_sgemm_choice("blas"), SgemmChoice::kBlas);
  try {
    parse_sgemm_choice("fast");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("WEFT_SGEMM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("own"), std::string::npos) << msg;
  }
}

TEST(SgemmChoice, ForcedChoicesRouteEveryProduct) {
  ChoiceGuard guard;
  const GemmArgs narrow{600, 128, 700, false, false, 700, 128, 128};
  const GemmArgs tiny{60, 10, 784, false, false, 784, 10, 10};
  const GemmArgs empty_k{60, 128, 0, false, false, 0, 128, 128};
  set_sgemm_choice(SgemmChoice::kBlas);
  EXPECT_FALSE(use_own_sgemm(narrow));
  set_sgemm_choice(SgemmChoice::kOwn);
  EXPECT_EQ(use_own_sgemm(tiny), sgemm_available());
  EXPECT_FALSE(use_own_sgemm(empty_k));  // nothing to multiply: the callers fill C themselves
  set_sgemm_choice(SgemmChoice::kAuto);
  // 600 rows: narrow enough for the AVX-512 variant, too short for the AVX2 one.
  EXPECT_EQ(use_own_sgemm(narrow), sgemm_has_avx512());
  EXPECT_EQ(use_own_sgemm(GemmArgs{60000, 10, 128, false, false, 128, 10, 10}), sgemm_available());
  EXPECT_FALSE(use_own_sgemm(tiny));
  const GemmArgs general{256, 1000, 784, false, false, 784, 1000, 1000};
  EXPECT_EQ(use_own_sgemm(general), own_sgemm_for(host_cpu_features(), general));
  EXPECT_EQ(host_cpu_features().avx512f || host_cpu_features().avx2_fma, sgemm_available());
  EXPECT_EQ(host_cpu_features().avx512f, sgemm_has_avx512());
}

// The rule under auto reads nothing but the features and the shape: every CPU kind against the
// shapes on each side of its thresholds.
TEST(SgemmChoice, OpenBlasCoresWithAvx512KernelsAreKnownByName) {
  for (const char* core : {"SkylakeX", "skylakex", "COOPERLAKE", "SapphireRapids"})
    EXPECT_TRUE(blas_core_has_avx512(core)) << core;
  for (const char* core : {"Haswell", "Zen", "Prescott", "Sandybridge", "", "SkylakeX2"})
    EXPECT_FALSE(blas_core_has_avx512(core)) << core;
  EXPECT_FALSE(blas_core_has_avx512(nullptr));
}

TEST(SgemmChoice, RuleIsAFunctionOfFeaturesAndShape) {
  const CpuFeatures none{}, avx2{.avx2_fma = true};
  const CpuFeatures half_width{.avx512f = true, .full_width_avx512 = false, .avx2_fma = true};
  const CpuFeatures full_width{.avx512f = true, .full_width_avx512 = true, .avx2_fma = true};
  // Where OpenBLAS runs AVX-512 kernels of its own: the narrow products only, as on half width.
  const CpuFeatures blas_avx512{.avx512f = true, .full_width_avx512 = true, .avx2_fma = true, .blas_avx512 = true};
  auto args = [](int64_t m, int64_t n, int64_t k) { return GemmArgs{m, n, k, false, false, k, n, n}; };
  struct Case {
    GemmArgs g;
    bool avx2, half, full;
    const char* what;
  };
  const Case cases[] = {
      {args(600, 128, 700), false, true, true, "narrow with rows enough"},
      {args(60000, 10, 784), true, true, true, "tall, under 32 columns"},
      {args(60000, 16, 784), true, true, true, "tall, 16 columns"},
      {args(60000, 17, 784), false, true, true, "tall, 17 columns, long inner dimension"},
      {args(60000, 128, 128), true, true, true, "tall and narrow, short inner dimension"},
      {args(60000, 128, 129), false, true, true, "tall and narrow, longer inner dimension"},
      {args(1023, 10, 784), true, false, false, "under 32 columns, under 1024 rows"},
      {args(128, 10, 784), true, false, false, "very narrow, 128 rows"},
      {args(127, 10, 784), false, false, false, "very narrow, 127 rows"},
      {args(64, 32, 64), false, true, true, "the smallest narrow product"},
      {args(63, 32, 64), false, false, true, "one row short of narrow: general"},
      {args(256, 1000, 784), false, false, true, "general"},
      {args(2048, 2048, 2048), false, false, true, "large square"},
      {args(48, 129, 64), false, false, true, "the smallest general product"},
      {args(47, 129, 64), false, false, false, "one row short"},
      {args(60, 10, 784), false, false, false, "tiny"},
      {args(600, 128, 0), false, false, false, "nothing to multiply"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(own_sgemm_for(none, c.g)) << c.what << " without AVX2";
    EXPECT_EQ(own_sgemm_for(avx2, c.g), c.avx2) << c.what << " with AVX2 only";
    EXPECT_EQ(own_sgemm_for(half_width, c.g), c.half) << c.what << " on half-width AVX-512";
    EXPECT_EQ(own_sgemm_for(full_width, c.g), c.full) << c.what << " on full-width AVX-512";
    EXPECT_EQ(own_sgemm_for(blas_avx512, c.g), c.half) << c.what << " where OpenBLAS has AVX-512 kernels";
  }
  GemmArgs very_narrow_transposed = args(1000, 10, 784);
  very_narrow_transposed.ta = true;  // the AVX2 variant would pack A: OpenBLAS is faster
  EXPECT_FALSE(own_sgemm_for(avx2, very_narrow_transposed));
  GemmArgs transposed = args(256, 1000, 784);
  transposed.ta = transposed.tb = true;
  EXPECT_TRUE(own_sgemm_for(full_width, transposed));
}

// A product on the edge of the old timing rule (weft's kernel against OpenBLAS at 256 x 512 x
// 512), transposed, through gemm_rows under auto; its bits written to `path`, or compared.
std::vector<float> edge_product() {
  const int64_t m = 256, n = 512, k = 512;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  ChoiceGuard guard;
  set_sgemm_choice(SgemmChoice::kAuto);
  gemm_rows<float>(cpu_device()->pool(), GemmArgs{m, n, k, false, true, k, k, n}, a.data(), b.data(), c.data());
  return c;
}

constexpr const char* kChildOutput = "WEFT_GEMM_TEST_CHILD_OUTPUT";

// Run only as the child of SameBitsInEveryProcess, which names the file to write.
TEST(SgemmChoiceChild, WritesTheEdgeProduct) {
  const char* path = std::getenv(kChildOutput);
  if (!path) GTEST_SKIP() << "run by SgemmChoice.SameBitsInEveryProcess";
  const std::vector<float> c = edge_product();
  std::FILE* f = std::fopen(path, "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(c.data(), sizeof(float), c.size(), f), c.size());
  std::fclose(f);
}

// Runs this test binary's child test in a new process and returns the product it wrote.
std::vector<float> product_of_child(const std::string& path) {
  std::remove(path.c_str());
  const pid_t pid = weft::testing::spawn_test_child("SgemmChoiceChild.WritesTheEdgeProduct",
                                                    {"WEFT_SGEMM", std::string(kChildOutput) + "=" + path});
  EXPECT_EQ(weft::testing::wait_test_child(pid, std::chrono::seconds(120)), "") << "the child";
  std::vector<float> c(256 * 512);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    ADD_FAILURE() << "the child wrote no " << path;
    return {};
  }
  EXPECT_EQ(std::fread(c.data(), sizeof(float), c.size(), f), c.size());
  std::fclose(f);
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Twice in this process and once in each of two fresh ones: the same bits every time, as
// data-parallel replicas and restarted jobs need. (The old rule timed both kernels at start-up,
// so on a machine where they are close the processes could disagree.)
TEST(SgemmChoice, SameBitsInEveryProcess) {
  const std::vector<float> here = edge_product();
  EXPECT_TRUE(same_bits(here, edge_product())) << "twice in one process";
  const std::string dir = ::testing::TempDir();
  const std::vector<float> first = product_of_child(dir + "weft_gemm_child_1.bin");
  const std::vector<float> second = product_of_child(dir + "weft_gemm_child_2.bin");
  EXPECT_TRUE(same_bits(first, second)) << "two child processes";
  EXPECT_TRUE(same_bits(here, first)) << "this process and a child";
}

// A product of general shape (neither narrow nor tiny), transposed both ways, through gemm_rows
// with each choice forced, against a double-precision loop.
TEST(SgemmChoice, BothChoicesGiveTheProduct) {
  ChoiceGuard guard;
  const int64_t m = 70, n = 300, k = 260;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (SgemmChoice choice : {SgemmChoice::kOwn, SgemmChoice::kBlas}) {
    set_sgemm_choice(choice);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        // The same logical operands, stored transposed where asked.
        std::vector<float> as(a.size()), bs(b.size());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t p = 0; p < k; ++p) as[static_cast<size_t>(ta ? p * m + i : i * k + p)] = a[static_cast<size_t>(i * k + p)];
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = 0; j < n; ++j) bs[static_cast<size_t>(tb ? j * k + p : p * n + j)] = b[static_cast<size_t>(p * n + j)];
        const GemmArgs g{m, n, k, ta, tb, ta ? m : k, tb ? k : n, n};
        std::vector<float> c(static_cast<size_t>(m * n), std::nanf(""));
        gemm_rows<float>(cpu_device()->pool(), g, as.data(), bs.data(), c.data(), [](int64_t, int64_t) {});
        int wrong = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t p = 0; p < k; ++p) want += double(a[static_cast<size_t>(i * k + p)]) * b[static_cast<size_t>(p * n + j)];
            if (!(std::abs(c[static_cast<size_t>(i * n + j)] - want) <= 1e-4) && wrong++ < 3)
              ADD_FAILURE() << "C(" << i << ", " << j << ") = " << c[static_cast<size_t>(i * n + j)] << ", want " << want
                            << " (choice " << int(choice) << ", ta " << ta << ", tb " << tb << ")";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace weft::cpu
