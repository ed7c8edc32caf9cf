// The oneDNN convolutions (kernels/cpu/conv_onednn.h) cut the batch into chunks fixed by the
// problem's shape and run oneDNN single-threaded in each of weft's pool tasks: the results are
// the same bits on one, two and three threads, and agree with weft's reference (float64) for
// batches of one chunk, of many, and of a shorter last chunk, in every pass; depthwise
// convolutions (oneDNN's grouped ones) too, against weft's depthwise reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv_params.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/conv_reference.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {
namespace {

struct Problem {
  std::string name;
  int64_t n, h, w, c, kh, kw, f;
  int64_t stride;
  PaddingMode padding;
};

const std::vector<Problem> kProblems = {
    {"one image a chunk", 2, 6, 5, 3, 3, 3, 4, 1, PaddingMode::Same},
    {"many chunks", 32, 16, 16, 16, 3, 3, 16, 1, PaddingMode::Same},
    {"stride 2", 23, 12, 12, 8, 3, 3, 24, 2, PaddingMode::Same},   // 8 chunks: 7 of 3, 1 of 2
    {"shorter last chunk", 37, 16, 16, 16, 3, 3, 16, 1, PaddingMode::Same},  // 8 chunks: 7 of 5, 1 of 2
    {"shorter last chunk, wide", 11, 8, 8, 64, 3, 3, 64, 1, PaddingMode::Same},
    {"one channel in", 40, 28, 28, 1, 5, 5, 6, 1, PaddingMode::Same},
    {"valid 5x5", 30, 14, 14, 6, 5, 5, 16, 1, PaddingMode::Valid},
    {"wide (oneDNN's blocked images)", 9, 8, 8, 64, 3, 3, 64, 1, PaddingMode::Same},
    {"wide strided 1x1", 9, 8, 8, 64, 1, 1, 128, 2, PaddingMode::Valid},
};

ConvParams params_of(const Problem& pr) {
  ConvWindow win;
  win.stride_h = win.stride_w = pr.stride;
  win.padding = pr.padding;
  ConvParams p;
  EXPECT_TRUE(conv_params(win, pr.n, pr.h, pr.w, pr.c, pr.kh, pr.kw, pr.f, &p)) << pr.name;
  return p;
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = d(gen);
  return v;
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Outputs {
  std::vector<float> y, dx, dw;
};

// The three passes on `pool`; false where oneDNN does not take the problem.
bool run_all(ThreadPool& pool, const ConvParams& p, const std::vector<float>& x, const std::vector<float>& w,
             const std::vector<float>& dy, Outputs* out) {
  out->y.assign(static_cast<size_t>(p.n * p.oh * p.ow * p.f), 0.f);
  out->dx.assign(x.size(), 0.f);
  out->dw.assign(w.size(), 0.f);
  return onednn_conv2d(pool, p, x.data(), w.data(), out->y.data()) &&
         onednn_conv2d_backprop_input(pool, p, w.data(), dy.data(), out->dx.data()) &&
         onednn_conv2d_backprop_filter(pool, p, x.data(), dy.data(), out->dw.data());
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what << ": bits differ";
}

// Within float32's rounding of sums of thousands of terms: relative to the largest element, since
// an element that is a sum with cancellation keeps the absolute error of its terms.
void expect_near(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1, worst = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst / scale, 1e-5) << what << ": largest error " << worst << " of a largest element " << scale;
}

// Depthwise problems: f is C * M, filter [kh, kw, C, M], a group per channel.
const std::vector<Problem> kDepthwiseProblems = {
    {"depthwise 3x3, many chunks", 40, 14, 14, 32, 3, 3, 32, 1, PaddingMode::Same},
    {"depthwise multiplier 2, stride 2, shorter last chunk", 37, 9, 9, 8, 3, 3, 16, 2, PaddingMode::Same},
    {"depthwise 5x5 valid, multiplier 3", 11, 12, 12, 6, 5, 5, 18, 1, PaddingMode::Valid},
};

// Runs each problem on one, two and three threads (the same bits) and against weft's float64
// reference; returns how many oneDNN took.
int check_problems(const std::vector<Problem>& problems, bool depthwise) {
  ThreadPool one(1), two(2), three(3);
  int taken = 0;
  for (const Problem& pr : problems) {
    SCOPED_TRACE(pr.name);
    ConvParams p = params_of(pr);
    if (depthwise) p.groups = p.c;
    const auto x = random_floats(p.n * p.h * p.w * p.c, 1);
    const auto w = random_floats(p.kh * p.kw * p.group_in() * p.f, 2);
    const auto dy = random_floats(p.n * p.oh * p.ow * p.f, 3);
    Outputs o1, o2, o3;
    if (!run_all(one, p, x, w, dy, &o1)) continue;  // oneDNN offers only its reference here
    ++taken;
    EXPECT_TRUE(run_all(two, p, x, w, dy, &o2));
    EXPECT_TRUE(run_all(three, p, x, w, dy, &o3));
    for (const auto* o : {&o2, &o3}) {
      expect_same_bits(o1.y, o->y, "forward");
      expect_same_bits(o1.dx, o->dx, "input gradient");
      expect_same_bits(o1.dw, o->dw, "filter gradient");
    }
    std::vector<double> y(o1.y.size()), dx(o1.dx.size()), dw(o1.dw.size());
    const auto xd = widened(x), wd = widened(w), dyd = widened(dy);
    conv2d_reference<double>(one, p, xd.data(), wd.data(), y.data());  // a grouped one: the depthwise loops
    conv2d_backprop_input_reference<double>(one, p, wd.data(), dyd.data(), dx.data());
    conv2d_backprop_filter_reference<double>(one, p, xd.data(), dyd.data(), dw.data());
    expect_near(o1.y, y, "forward");
    expect_near(o1.dx, dx, "input gradient");
    expect_near(o1.dw, dw, "filter gradient");
  }
  return taken;
}

TEST(OnednnConv, SameBitsOnOneTwoAndThreeThreadsAndMatchesTheReference) {
  EXPECT_GE(check_problems(kProblems, false), 6) << "oneDNN took too few of the problems for the test to mean anything";
}

TEST(OnednnConv, DepthwiseSameBitsOnOneTwoAndThreeThreadsAndMatchesTheReference) {
  EXPECT_EQ(check_problems(kDepthwiseProblems, true), 3) << "oneDNN has vectorised grouped kernels for these on x86";
}

}  // namespace
}  // namespace weft::cpu
