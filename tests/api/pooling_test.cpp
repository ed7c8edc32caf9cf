// max_pool2d and avg_pool2d: against direct loops written here (float64), their gradients and
// gradients' gradients by finite differences, eager against traced, float16 / bfloat16 against
// float32, and the InvalidArgument of each bad argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "eager_vs_traced.h"
#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

struct PoolCase {
  Shape shape;  // NHWC
  std::vector<int64_t> ksize, strides;
  std::string padding;
};

// Strides, both paddings, odd sizes, windows as large as the input, and a SAME window whose
// corners hang over the edge on both sides.
const PoolCase kCases[] = {
    {{1, 4, 4, 1}, {2, 2}, {2, 2}, "VALID"}, {{2, 5, 7, 3}, {3, 2}, {2, 3}, "VALID"},
    {{2, 5, 7, 3}, {3, 2}, {2, 3}, "SAME"},  {{1, 3, 3, 2}, {3, 3}, {1, 1}, "VALID"},
    {{1, 3, 3, 2}, {3, 3}, {1, 1}, "same"},  {{1, 4, 5, 2}, {4, 5}, {2, 2}, "SAME"},
    {{2, 6, 5, 1}, {2, 3}, {1, 1}, "SAME"},  {{1, 1, 1, 4}, {1, 1}, {1, 1}, "VALID"},
};

std::string describe(const PoolCase& c) {
  return c.shape.to_string() + " ksize " + std::to_string(c.ksize[0]) + "x" + std::to_string(c.ksize[1]) +
         " strides " + std::to_string(c.strides[0]) + "x" + std::to_string(c.strides[1]) + " " + c.padding;
}

// Distinct values (a shuffled ramp, gaps far wider than the finite differences' step), so max
// pooling has no ties and its gradient is smooth around them.
Tensor distinct(const Shape& s, uint32_t seed, DType d = float64) {
  const int64_t n = s.num_elements();
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (double& x : v) x = (x - n / 2.0) * 0.25;
  return cast(constant(v, s), d);
}

// The reference: plain loops, its own SAME arithmetic (TensorFlow's), dividing SAME averages by
// the cells inside the input.
std::vector<double> reference(const std::vector<double>& x, const Shape& s, const PoolCase& c, bool max,
                              int64_t* out_h, int64_t* out_w) {
  const int64_t n = s[0], h = s[1], w = s[2], ch = s[3];
  const bool same = c.padding == "SAME" || c.padding == "same";
  int64_t pt = 0, pl = 0;
  if (same) {
    *out_h = (h + c.strides[0] - 1) / c.strides[0];
    *out_w = (w + c.strides[1] - 1) / c.strides[1];
    pt = std::max<int64_t>((*out_h - 1) * c.strides[0] + c.ksize[0] - h, 0) / 2;
    pl = std::max<int64_t>((*out_w - 1) * c.strides[1] + c.ksize[1] - w, 0) / 2;
  } else {
    *out_h = (h - c.ksize[0]) / c.strides[0] + 1;
    *out_w = (w - c.ksize[1]) / c.strides[1] + 1;
  }
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < *out_h; ++oh)
      for (int64_t ow = 0; ow < *out_w; ++ow)
        for (int64_t k = 0; k < ch; ++k) {
          double acc = max ? -INFINITY : 0;
          int64_t cells = 0;
          for (int64_t i = 0; i < c.ksize[0]; ++i)
            for (int64_t j = 0; j < c.ksize[1]; ++j) {
              const int64_t ih = oh * c.strides[0] - pt + i, iw = ow * c.strides[1] - pl + j;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              const double v = x[static_cast<size_t>(((b * h + ih) * w + iw) * ch + k)];
              acc = max ? std::max(acc, v) : acc + v;
              ++cells;
            }
          y.push_back(max ? acc : acc / static_cast<double>(cells));
        }
  return y;
}

TEST(Pooling, MatchesDirectLoops) {
  uint32_t seed = 1;
  for (const PoolCase& c : kCases)
    for (bool max : {true, false}) {
      const Tensor x = distinct(c.shape, seed++);
      const Tensor y = max ? max_pool2d(x, c.ksize, c.strides, c.padding) : avg_pool2d(x, c.ksize, c.strides, c.padding);
      int64_t oh = 0, ow = 0;
      const std::vector<double> want = reference(x.to_vector<double>(), c.shape, c, max, &oh, &ow);
      ASSERT_EQ(y.shape(), (Shape{c.shape[0], oh, ow, c.shape[3]})) << describe(c);
      const std::vector<double> got = y.to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-12) << (max ? "max " : "avg ") << describe(c) << " element " << i;
    }
}

TEST(Pooling, SameAverageDividesByTheValidCellsOnly) {
  // Ones average to one everywhere, corners included; dividing by the window (9) would give 4/9.
  const Tensor y = avg_pool2d(ones({1, 3, 3, 1}, float64), {3, 3}, {1, 1}, "SAME");
  for (double v : y.to_vector<double>()) EXPECT_DOUBLE_EQ(v, 1.0);
}

TEST(Pooling, MaxGradientGoesToTheFirstMaximumOfATie) {
  // Rows 5 5 3 7 / 5 1 7 7: the left window ties three 5s, the right one three 7s.
  const Tensor x = constant(std::vector<double>{5, 5, 3, 7, 5, 1, 7, 7}, Shape{1, 2, 4, 1});
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_sum(max_pool2d(x, {2, 2}, {2, 2})), x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 0, 0, 1, 0, 0, 0, 0}));
}

TEST(PoolingGradients, FiniteDifferences) {
  uint32_t seed = 100;
  for (const PoolCase& c : kCases) {
    const auto& k = c.ksize;
    const auto& s = c.strides;
    const std::string& p = c.padding;
    expect_gradients_match([&](auto& in) { return max_pool2d(in[0], k, s, p); }, {distinct(c.shape, seed++)}, 1e-6,
                           1e-6, "max_pool2d " + describe(c));
    expect_gradients_match([&](auto& in) { return avg_pool2d(in[0], k, s, p); }, {distinct(c.shape, seed++)}, 1e-6,
                           1e-6, "avg_pool2d " + describe(c));
  }
}

// The gradient's gradient: grad_x sum(pool(x) * u) is MaxPoolGrad(x, y, u) / AvgPoolGrad(u), whose
// gradient in u is MaxPoolGradGrad / avg_pool2d; one level deeper, the gradient of
// MaxPoolGradGrad(x, y, v) in v is MaxPoolGrad again.
TEST(PoolingGradients, SecondAndThirdOrder) {
  uint32_t seed = 200;
  for (const PoolCase& c : kCases) {
    const auto& k = c.ksize;
    const auto& s = c.strides;
    const std::string& p = c.padding;
    for (bool max : {true, false}) {
      auto pool = [&](const Tensor& x) { return max ? max_pool2d(x, k, s, p) : avg_pool2d(x, k, s, p); };
      const Tensor x = distinct(c.shape, seed++);
      const Shape pooled = pool(x).shape();
      auto grad_x = [&](const Tensor& xx, const Tensor& u) {
        GradientTape tape;
        tape.watch(xx);
        return tape.gradient(reduce_sum(mul(pool(xx), u)), xx);
      };
      const std::string what = (max ? "max " : "avg ") + describe(c);
      expect_gradients_match([&](auto& in) { return grad_x(in[0], in[1]); },
                             {x, random::uniform(pooled, -1, 1, seed++, float64)}, 1e-6, 1e-6, "second order " + what);
      expect_gradients_match(
          [&](auto& in) {
            const Tensor u = zeros(pooled, float64);
            GradientTape tape;
            tape.watch(u);
            return tape.gradient(reduce_sum(mul(grad_x(in[0], u), in[1])), u);
          },
          {x, random::uniform(c.shape, -1, 1, seed++, float64)}, 1e-6, 1e-6, "third order " + what);
    }
  }
}

TEST(Pooling, EagerEqualsTraced) {
  using namespace eager_vs_traced;
  uint32_t seed = 300;
  for (const char* node : {"MaxPool", "AvgPool"})
    for (DType d : dtypes_with_kernel(node))
      for (const PoolCase& c : kCases) {
        const bool max = std::string(node) == "MaxPool";
        const PoolCase cc = c;
        Op op = [cc, max](const std::vector<Tensor>& in) {
          return max ? max_pool2d(in[0], cc.ksize, cc.strides, cc.padding)
                     : avg_pool2d(in[0], cc.ksize, cc.strides, cc.padding);
        };
        expect_traced_equals_eager(op, {sample(d, c.shape, seed++, -10, 10)}, node,
                                   std::string(node) + " " + std::string(dtype_name(d)) + " " + describe(c));
      }
}

TEST(PoolingGradients, EagerEqualsTraced) {
  using namespace eager_vs_traced;
  for (const PoolCase& c : kCases)
    for (bool max : {true, false}) {
      const PoolCase cc = c;
      Op op = [cc, max](const std::vector<Tensor>& in) {
        GradientTape tape;
        tape.watch(in[0]);
        const Tensor y = max ? max_pool2d(in[0], cc.ksize, cc.strides, cc.padding)
                             : avg_pool2d(in[0], cc.ksize, cc.strides, cc.padding);
        return tape.gradient(reduce_sum(mul(y, y)), in[0]);
      };
      Tensor x = distinct(c.shape, 7, float32);
      expect_traced_equals_eager(op, {x}, max ? "MaxPoolGrad" : "AvgPoolGrad",
                                 std::string(max ? "max" : "avg") + " gradient " + describe(c));
    }
}

// Max pooling over several channels at a time (the kernel walks each window a vector of channels
// at a time, the last vector overlapping the one before when the count is not a multiple; on
// AVX-512, up to 16 channels in one masked vector, the gradient written window by window where
// windows tile the image (2x2 stride 2 VALID on even sides), cleared first where they leave cells
// out (SAME on odd sides) and added into a cleared image where they overlap (3x3 stride 2)): values
// with many ties, a NaN and signed zeros, in float32 and float64, against a direct loop of the
// rule: the first maximum in window order, a NaN winning and sticking; the gradient goes to that cell.
TEST(Pooling, ManyChannelsKeepTheFirstMaximumRule) {
  for (DType d : {float32, float64})
    for (int64_t channels : {1, 5, 6, 9, 16, 17})
      for (const PoolCase& c : {PoolCase{{2, 7, 6, channels}, {2, 2}, {2, 2}, "SAME"},
                                PoolCase{{2, 8, 6, channels}, {2, 2}, {2, 2}, "VALID"},
                                PoolCase{{1, 7, 7, channels}, {3, 3}, {2, 2}, "VALID"}}) {
        const Shape& s = c.shape;
        std::vector<double> v(static_cast<size_t>(s.num_elements()));
        std::mt19937 gen(static_cast<uint32_t>(channels));
        for (double& e : v) e = static_cast<double>(static_cast<int>(gen() % 4)) - 2;  // ties everywhere
        for (size_t i = 0; i < v.size(); i += 7) v[i] = (i / 7) % 2 ? 0.0 : -0.0;
        v[v.size() / 3] = NAN;
        const Tensor x = cast(constant(v, s), d);
        GradientTape tape;
        tape.watch(x);
        const Tensor y = max_pool2d(x, c.ksize, c.strides, c.padding);
        const Tensor u = cast(random::uniform(y.shape(), -1, 1, 5, float64), d);
        const std::vector<double> got_dx = cast(tape.gradient(reduce_sum(mul(y, u)), x), float64).to_vector<double>();
        const std::vector<double> got = cast(y, float64).to_vector<double>(), ud = cast(u, float64).to_vector<double>();
        const int64_t oh = y.shape()[1], ow = y.shape()[2], h = s[1], w = s[2];
        const int64_t pt = c.padding == "SAME" ? std::max<int64_t>((oh - 1) * 2 + c.ksize[0] - h, 0) / 2 : 0;
        const int64_t pl = c.padding == "SAME" ? std::max<int64_t>((ow - 1) * 2 + c.ksize[1] - w, 0) / 2 : 0;
        std::vector<double> want_dx(v.size(), 0.0);
        size_t out = 0;
        for (int64_t b = 0; b < s[0]; ++b)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j)
              for (int64_t k = 0; k < channels; ++k, ++out) {
                int64_t best = -1;
                for (int64_t r = 0; r < c.ksize[0]; ++r)
                  for (int64_t q = 0; q < c.ksize[1]; ++q) {
                    const int64_t ih = i * c.strides[0] - pt + r, iw = j * c.strides[1] - pl + q;
                    if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                    const int64_t at = ((b * h + ih) * w + iw) * channels + k;
                    const double cand = v[static_cast<size_t>(at)], cur = best < 0 ? 0 : v[static_cast<size_t>(best)];
                    if (best < 0 || (!std::isnan(cur) && (cand > cur || std::isnan(cand)))) best = at;
                  }
                const double want = v[static_cast<size_t>(best)];
                const std::string where = std::string(dtype_name(d)) + " " + describe(c) + " output " + std::to_string(out);
                if (std::isnan(want)) {
                  EXPECT_TRUE(std::isnan(got[out])) << where;
                } else {
                  EXPECT_EQ(got[out], want) << where;
                  EXPECT_EQ(std::signbit(got[out]), std::signbit(want)) << "the first of equal zeros, " << where;
                }
                want_dx[static_cast<size_t>(best)] += ud[out];
              }
        for (size_t i = 0; i < want_dx.size(); ++i)
          EXPECT_NEAR(got_dx[i], want_dx[i], d == float32 ? 1e-5 : 1e-12) << dtype_name(d) << " " << describe(c) << " dx " << i;
      }
}

// The 16-bit kernels compute in float32 and round once: exactly the float32 result rounded.
TEST(Pooling, HalfTypesMatchFloat32) {
  for (DType d : {float16, bfloat16})
    for (const PoolCase& c : kCases)
      for (bool max : {true, false}) {
        auto pool = [&](const Tensor& x) {
          return max ? max_pool2d(x, c.ksize, c.strides, c.padding) : avg_pool2d(x, c.ksize, c.strides, c.padding);
        };
        const Tensor x = cast(random::uniform(c.shape, -4, 4, 9, float32), d);
        const Tensor want = cast(pool(cast(x, float32)), d);
        const Tensor got = pool(x);
        ASSERT_EQ(got.dtype(), d);
        EXPECT_EQ(cast(got, float32).to_vector<float>(), cast(want, float32).to_vector<float>())
            << dtype_name(d) << (max ? " max " : " avg ") << describe(c);
        // And the gradient, the same way.
        auto grad = [&](const Tensor& xx) {
          GradientTape tape;
          tape.watch(xx);
          return tape.gradient(reduce_sum(pool(xx)), xx);
        };
        EXPECT_EQ(cast(grad(x), float32).to_vector<float>(), cast(cast(grad(cast(x, float32)), d), float32).to_vector<float>())
            << "gradient " << dtype_name(d) << (max ? " max " : " avg ") << describe(c);
      }
}

// The message of the InvalidArgument `f` throws, or a failure.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument";
  return "";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(message.find(p), std::string::npos) << "\"" << p << "\" not in: " << message;
}

TEST(Pooling, BadArgumentsAreInvalidArgument) {
  const Tensor x = zeros({1, 4, 4, 2});
  expect_mentions(error_of([&] { max_pool2d(zeros({4, 4, 2}), {2, 2}, {1, 1}); }), {"[max_pool2d]", "rank-4", "(4, 4, 2)"});
  expect_mentions(error_of([&] { avg_pool2d(zeros({4, 4, 2}), {2, 2}, {1, 1}); }), {"[avg_pool2d]", "rank-4"});
  expect_mentions(error_of([&] { max_pool2d(x, {5, 2}, {1, 1}, "VALID"); }),
                  {"[max_pool2d]", "ksize [5, 2]", "larger", "(1, 4, 4, 2)"});
  expect_mentions(error_of([&] { max_pool2d(x, {2, 2}, {1, 1}, "FULL"); }), {"[max_pool2d]", "padding", "FULL"});
  expect_mentions(error_of([&] { max_pool2d(x, {2, 2}, {1, 1}, "EXPLICIT"); }), {"[max_pool2d]", "padding"});
  expect_mentions(error_of([&] { max_pool2d(x, {2, 2}, {0, 1}); }), {"[max_pool2d]", "strides", "[0, 1]"});
  expect_mentions(error_of([&] { avg_pool2d(x, {2, 2}, {1, -1}); }), {"[avg_pool2d]", "strides"});
  expect_mentions(error_of([&] { max_pool2d(x, {0, 2}, {1, 1}); }), {"[max_pool2d]", "ksize", "[0, 2]"});
  expect_mentions(error_of([&] { max_pool2d(x, {2}, {1, 1}); }), {"[max_pool2d]", "ksize", "[2]"});
  expect_mentions(error_of([&] { max_pool2d(zeros({1, 4, 4, 2}, int32), {2, 2}, {1, 1}); }), {"[max_pool2d]", "int32"});
  // A SAME window may exceed the input: it is padded.
  EXPECT_EQ(max_pool2d(x, {5, 5}, {1, 1}, "SAME").shape(), (Shape{1, 4, 4, 2}));
}

}  // namespace
}  // namespace weft
