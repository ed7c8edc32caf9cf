// Which GEMM a float product goes to (kernels/cpu/gemm.h, sgemm_choice.h), and that both give the
// same product through the dispatch that every matmul kernel uses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sgemm_choice.h"
#include "runtime/error.h"

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
  EXPECT_EQ(use_own_sgemm(general), sgemm_has_avx512() && own_sgemm_wins_general_shapes());
  EXPECT_EQ(own_sgemm_wins_general_shapes(), own_sgemm_wins_general_shapes());  // measured once
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
