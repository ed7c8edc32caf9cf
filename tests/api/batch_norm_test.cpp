// fused_batch_norm: training normalises by the batch's statistics (and returns them, biased
// variance), inference by the given ones, both against loops written here; gradients and
// gradients' gradients in both modes by finite differences (float64); eager against traced;
// float16 / bfloat16 against float32; the InvalidArgument of each bad argument.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "eager_vs_traced.h"
#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

const Shape kShapes[] = {{6, 3}, {2, 3, 2, 4}, {1, 1, 5, 2}};

Tensor u64(const Shape& s, int64_t seed, double lo, double hi) { return random::uniform(s, lo, hi, seed, float64); }
int64_t channels(const Shape& s) { return s[s.rank() - 1]; }

// Per-channel mean and biased variance of x ([rows, C] in memory), computed directly.
void moments(const std::vector<double>& x, int64_t c, std::vector<double>* mean, std::vector<double>* var) {
  const int64_t rows = static_cast<int64_t>(x.size()) / c;
  mean->assign(static_cast<size_t>(c), 0.0);
  var->assign(static_cast<size_t>(c), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < c; ++k) (*mean)[k] += x[r * c + k] / static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < c; ++k) (*var)[k] += std::pow(x[r * c + k] - (*mean)[k], 2) / static_cast<double>(rows);
}

std::vector<double> normalise(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b,
                              const std::vector<double>& mean, const std::vector<double>& var, double eps) {
  const int64_t c = static_cast<int64_t>(g.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t k = static_cast<int64_t>(i) % c;
    y[i] = g[k] * (x[i] - mean[k]) / std::sqrt(var[k] + eps) + b[k];
  }
  return y;
}

TEST(BatchNorm, TrainingNormalisesByTheBatchStatistics) {
  int64_t seed = 1;
  for (const Shape& s : kShapes) {
    const int64_t c = channels(s);
    const Tensor x = u64(s, seed++, -3, 5);
    const Tensor gamma = u64({c}, seed++, 0.5, 2), beta = u64({c}, seed++, -1, 1);
    const double eps = 1e-3;
    const BatchNormResult r = fused_batch_norm(x, gamma, beta, {}, {}, eps, true);
    std::vector<double> mean, var;
    moments(x.to_vector<double>(), c, &mean, &var);
    const std::vector<double> bm = r.batch_mean.to_vector<double>(), bv = r.batch_variance.to_vector<double>();
    for (int64_t k = 0; k < c; ++k) {
      EXPECT_NEAR(bm[k], mean[k], 1e-12) << s.to_string() << " channel " << k;
      EXPECT_NEAR(bv[k], var[k], 1e-12) << s.to_string() << " channel " << k;
    }
    const std::vector<double> want =
        normalise(x.to_vector<double>(), gamma.to_vector<double>(), beta.to_vector<double>(), mean, var, eps);
    const std::vector<double> got = r.y.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << s.to_string() << " " << i;
    // With gamma 1 and beta 0 each channel comes out with mean 0 and variance var / (var + eps).
    const Tensor xf = cast(x, float32);
    const BatchNormResult unit = fused_batch_norm(xf, ones({c}), zeros({c}), {}, {}, 1e-5, true);
    std::vector<double> ym, yv;
    moments(cast(unit.y, float64).to_vector<double>(), c, &ym, &yv);
    for (int64_t k = 0; k < c; ++k) {
      EXPECT_NEAR(ym[k], 0.0, 1e-5) << s.to_string() << " channel " << k;
      EXPECT_NEAR(yv[k], 1.0, 1e-3) << s.to_string() << " channel " << k;
    }
  }
}

// The statistics take one pass over x (sums of x - K and its square, K one of the channel's
// values): a channel whose mean is far from zero (mean^2 / variance ~ 3e11), over many rows in
// float32, still gets its variance to float32 precision, where E[x^2] - E[x]^2, even summed in
// double, loses 0.2% of it; a constant channel gets exactly 0; an empty batch NaN.
TEST(BatchNorm, OnePassStatisticsSurviveALargeMean) {
  const int64_t rows = 65536;
  std::vector<float> v(static_cast<size_t>(rows * 3));
  for (int64_t r = 0; r < rows; ++r) {
    v[r * 3] = 3.0e7f + static_cast<float>((r * 7919) % 101) * 2.0f;  // mean 3e7, std ~58
    v[r * 3 + 1] = -3.5f;                                               // constant
    v[r * 3 + 2] = static_cast<float>((r * 31) % 17) - 8.0f;
  }
  const Tensor x = constant(v, Shape{rows, 3});
  const BatchNormResult got = fused_batch_norm(x, ones({3}), zeros({3}), {}, {}, 1e-3, true);
  std::vector<double> xd(v.begin(), v.end()), mean, var;
  moments(xd, 3, &mean, &var);
  const std::vector<float> bm = got.batch_mean.to_vector<float>(), bv = got.batch_variance.to_vector<float>();
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(bm[k], mean[k], std::abs(mean[k]) * 1e-6 + 1e-6) << "channel " << k;
    EXPECT_NEAR(bv[k], var[k], var[k] * 1e-6) << "channel " << k;
  }
  EXPECT_EQ(bv[1], 0.0f);
  const BatchNormResult empty = fused_batch_norm(zeros({0, 2}), ones({2}), zeros({2}), {}, {}, 1e-3, true);
  for (float m : empty.batch_mean.to_vector<float>()) EXPECT_TRUE(std::isnan(m));
  for (float s : empty.batch_variance.to_vector<float>()) EXPECT_TRUE(std::isnan(s));
}

TEST(BatchNorm, TrainingIgnoresTheMovingStatistics) {
  const Tensor x = u64({4, 3}, 5, -1, 1), g = ones({3}, float64), b = zeros({3}, float64);
  const Tensor a = fused_batch_norm(x, g, b, {}, {}, 1e-3, true).y;
  const Tensor m = fused_batch_norm(x, g, b, u64({3}, 6, -9, 9), u64({3}, 7, 1, 9), 1e-3, true).y;
  EXPECT_EQ(a.to_vector<double>(), m.to_vector<double>());
}

TEST(BatchNorm, InferenceUsesTheGivenStatistics) {
  int64_t seed = 20;
  for (const Shape& s : kShapes) {
    const int64_t c = channels(s);
    const Tensor x = u64(s, seed++, -3, 5);
    const Tensor gamma = u64({c}, seed++, 0.5, 2), beta = u64({c}, seed++, -1, 1);
    const Tensor mean = u64({c}, seed++, -1, 1), var = u64({c}, seed++, 0.5, 3);
    const BatchNormResult r = fused_batch_norm(x, gamma, beta, mean, var, 1e-2, false);
    const std::vector<double> want = normalise(x.to_vector<double>(), gamma.to_vector<double>(),
                                               beta.to_vector<double>(), mean.to_vector<double>(),
                                               var.to_vector<double>(), 1e-2);
    const std::vector<double> got = r.y.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << s.to_string() << " " << i;
    EXPECT_EQ(r.batch_mean.to_vector<double>(), mean.to_vector<double>());
    EXPECT_EQ(r.batch_variance.to_vector<double>(), var.to_vector<double>());
  }
}

TEST(BatchNormGradients, FiniteDifferencesBothModes) {
  int64_t seed = 40;
  for (const Shape& s : kShapes) {
    const int64_t c = channels(s);
    const Tensor x = u64(s, seed++, -2, 2), gamma = u64({c}, seed++, 0.5, 2), beta = u64({c}, seed++, -1, 1);
    expect_gradients_match([](auto& in) { return fused_batch_norm(in[0], in[1], in[2], {}, {}, 1e-3, true).y; },
                           {x, gamma, beta}, 1e-6, 1e-5, "training " + s.to_string());
    expect_gradients_match(
        [](auto& in) { return fused_batch_norm(in[0], in[1], in[2], in[3], in[4], 1e-3, false).y; },
        {x, gamma, beta, u64({c}, seed++, -1, 1), u64({c}, seed++, 0.5, 2)}, 1e-6, 1e-5, "inference " + s.to_string());
  }
}

// The gradient's gradient: d/d(x, gamma, u) of grad_{x or gamma} sum(bn(x) * u), in both modes;
// in inference, also through the given mean and variance.
TEST(BatchNormGradients, SecondOrderBothModes) {
  int64_t seed = 60;
  for (const Shape& s : kShapes) {
    const int64_t c = channels(s);
    const Tensor x = u64(s, seed++, -2, 2), gamma = u64({c}, seed++, 0.5, 2), beta = u64({c}, seed++, -1, 1);
    const Tensor u = u64(s, seed++, -1, 1), mean = u64({c}, seed++, -1, 1), var = u64({c}, seed++, 0.5, 2);
    for (bool training : {true, false})
      for (int wrt : {0, 1}) {  // the inner gradient in x, or in gamma
        const std::string what = std::string(training ? "training" : "inference") + (wrt ? " dgamma " : " dx ") +
                                 s.to_string();
        expect_gradients_match(
            [&](auto& in) {
              GradientTape tape;
              tape.watch(in[0]);
              tape.watch(in[1]);
              const Tensor y = training ? fused_batch_norm(in[0], in[1], beta, {}, {}, 1e-3, true).y
                                        : fused_batch_norm(in[0], in[1], beta, in[3], in[4], 1e-3, false).y;
              return tape.gradient(reduce_sum(mul(y, in[2])), std::vector<Tensor>{in[0], in[1]})[wrt];
            },
            {x, gamma, u, mean, var}, 1e-6, 1e-5, "second order " + what);
      }
  }
}

TEST(BatchNorm, EagerEqualsTraced) {
  using namespace eager_vs_traced;
  uint32_t seed = 80;
  for (DType d : dtypes_with_kernel("FusedBatchNorm"))
    for (const Shape& s : kShapes) {
      const int64_t c = channels(s);
      const DType p = d == float64 ? float64 : float32;
      const Tensor x = sample(d, s, seed++, -3, 3, false);
      const Tensor gamma = cast(random::uniform({c}, 0.5, 2, seed++, float64), p);
      const Tensor beta = cast(random::uniform({c}, -1, 1, seed++, float64), p);
      const Tensor mean = cast(random::uniform({c}, -1, 1, seed++, float64), p);
      const Tensor var = cast(random::uniform({c}, 0.5, 2, seed++, float64), p);
      const std::string what = std::string(dtype_name(d)) + " " + s.to_string();
      expect_traced_equals_eager(
          [](const std::vector<Tensor>& in) { return fused_batch_norm(in[0], in[1], in[2], {}, {}, 1e-3, true).y; },
          {x, gamma, beta}, "FusedBatchNorm", "training " + what);
      expect_traced_equals_eager(
          [](const std::vector<Tensor>& in) { return fused_batch_norm(in[0], in[1], in[2], {}, {}, 1e-3, true).batch_variance; },
          {x, gamma, beta}, "FusedBatchNorm", "training variance " + what);
      expect_traced_equals_eager(
          [mean, var](const std::vector<Tensor>& in) {
            return fused_batch_norm(in[0], in[1], in[2], mean, var, 1e-3, false).y;
          },
          {x, gamma, beta}, "FusedBatchNorm", "inference " + what);
      if (d == float32 || d == float64)
        expect_traced_equals_eager(
            [](const std::vector<Tensor>& in) {
              GradientTape tape;
              tape.watch(in[0]);
              const Tensor y = fused_batch_norm(in[0], in[1], in[2], {}, {}, 1e-3, true).y;
              return tape.gradient(reduce_sum(mul(y, y)), in[0]);
            },
            {x, gamma, beta}, "FusedBatchNormGrad", "gradient " + what);
    }
}

// 16-bit x is widened exactly, normalised in float32 and rounded once: the float32 result rounded.
TEST(BatchNorm, HalfTypesMatchFloat32) {
  for (DType d : {float16, bfloat16})
    for (const Shape& s : kShapes)
      for (bool training : {true, false}) {
        const int64_t c = channels(s);
        const Tensor x = cast(random::uniform(s, -3, 3, 3, float32), d);
        const Tensor g = random::uniform({c}, 0.5, 2, 4, float32), b = random::uniform({c}, -1, 1, 5, float32);
        const Tensor m = random::uniform({c}, -1, 1, 6, float32), v = random::uniform({c}, 0.5, 2, 7, float32);
        const BatchNormResult got = fused_batch_norm(x, g, b, m, v, 1e-3, training);
        const BatchNormResult want = fused_batch_norm(cast(x, float32), g, b, m, v, 1e-3, training);
        const std::string what = std::string(dtype_name(d)) + (training ? " training " : " inference ") + s.to_string();
        ASSERT_EQ(got.y.dtype(), d) << what;
        ASSERT_EQ(got.batch_mean.dtype(), float32) << what;
        EXPECT_EQ(cast(got.y, float32).to_vector<float>(), cast(cast(want.y, d), float32).to_vector<float>()) << what;
        EXPECT_EQ(got.batch_mean.to_vector<float>(), want.batch_mean.to_vector<float>()) << what;
        EXPECT_EQ(got.batch_variance.to_vector<float>(), want.batch_variance.to_vector<float>()) << what;
        auto grads = [&](const Tensor& xx) {
          GradientTape tape;
          tape.watch(xx);
          tape.watch(g);
          const Tensor y = fused_batch_norm(xx, g, b, m, v, 1e-3, training).y;
          return tape.gradient(reduce_sum(mul(cast(y, float32), cast(y, float32))), std::vector<Tensor>{xx, g});
        };
        const std::vector<Tensor> gh = grads(x), gf = grads(cast(x, float32));
        ASSERT_EQ(gh[0].dtype(), d) << what;
        // The 16-bit y rounds before the loss squares it, so compare loosely.
        const std::vector<float> a = cast(gh[0], float32).to_vector<float>(), e = gf[0].to_vector<float>();
        for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 0.1 * (1 + std::abs(e[i]))) << what << " dx " << i;
      }
}

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

TEST(BatchNorm, BadArgumentsAreInvalidArgument) {
  const Tensor g = ones({3}), b = zeros({3});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 2, 3}), g, b, {}, {}); }),
                  {"[fused_batch_norm]", "rank 2", "(2, 2, 3)"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}), ones({4}), b, {}, {}); }),
                  {"[fused_batch_norm]", "scale", "(4,)"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}), g, ones({3}, float64), {}, {}); }),
                  {"[fused_batch_norm]", "offset", "float32", "float64"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}), g, b, {}, {}, 1e-3, false); }),
                  {"[fused_batch_norm]", "mean and variance"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}), g, b, zeros({0}), zeros({0}), 1e-3, false); }),
                  {"[fused_batch_norm]", "mean"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}), g, b, {}, {}, -1.0); }),
                  {"[fused_batch_norm]", "epsilon"});
  expect_mentions(error_of([&] { fused_batch_norm(zeros({2, 3}, int32), g, b, {}, {}); }),
                  {"[fused_batch_norm]", "int32"});
}

}  // namespace
}  // namespace weft
