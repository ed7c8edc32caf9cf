// clip_by_global_norm and global_norm against float64 formulas written here: values, the no-op
// under the norm, undefined and non-finite gradients, one reduction in the traced graph, eager
// against traced, the norm's gradient, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eager_vs_traced.h"
#include "gradient_check.h"

namespace weft {
namespace {

using namespace eager_vs_traced;

TEST(ClipByGlobalNorm, ScalesEveryGradientByTheGlobalNorm) {
  // Norm sqrt(9 + 16 + 144) = 13.
  auto [clipped, norm] = clip_by_global_norm({constant({3.0, 4.0}), constant({{12.0}})}, 1.0);
  EXPECT_DOUBLE_EQ(norm.item<double>(), 13.0);
  ASSERT_EQ(clipped.size(), 2u);
  EXPECT_NEAR(clipped[0].to_vector<double>()[0], 3.0 / 13, 1e-16);
  EXPECT_NEAR(clipped[0].to_vector<double>()[1], 4.0 / 13, 1e-16);
  EXPECT_NEAR(clipped[1].to_vector<double>()[0], 12.0 / 13, 1e-16);
  EXPECT_EQ(clipped[1].shape(), (Shape{1, 1}));
  EXPECT_NEAR(global_norm(clipped).item<double>(), 1.0, 1e-15) << "clipped to the norm";
}

TEST(ClipByGlobalNorm, MatchesAFloat64Reference) {
  for (DType dtype : {float32, float64}) {
    std::vector<Tensor> grads = {random::normal({3, 50}, 0, 2, 1, dtype), random::normal({(1 << 16) + 5}, 0, 1, 2, dtype),
                                 random::normal({}, 0, 3, 3, dtype)};
    double sum = 0;
    for (const Tensor& g : grads)
      for (double x : cast(g, float64).to_vector<double>()) sum += x * x;
    const double want_norm = std::sqrt(sum);
    for (double clip : {0.5, 50.0, 1e6}) {
      auto [clipped, norm] = clip_by_global_norm(grads, clip);
      const double tol = dtype == float64 ? 1e-12 : 1e-6;
      EXPECT_NEAR(cast(norm, float64).item<double>() / want_norm, 1.0, tol) << dtype_name(dtype);
      EXPECT_EQ(norm.dtype(), dtype);
      const double scale = clip / std::max(want_norm, clip);
      for (size_t i = 0; i < grads.size(); ++i) {
        const std::vector<double> g = cast(grads[i], float64).to_vector<double>();
        const std::vector<double> c = cast(clipped[i], float64).to_vector<double>();
        for (size_t k = 0; k < g.size(); ++k) ASSERT_NEAR(c[k], g[k] * scale, tol * std::abs(g[k]) + 1e-300) << i << " " << k;
      }
    }
  }
}

TEST(ClipByGlobalNorm, WithinTheNormTheGradientsAreUnchangedBitForBit) {
  std::vector<Tensor> grads = {random::normal({4, 4}, 0, 1, 5), random::normal({7}, 0, 1, 6)};
  const double norm = global_norm(grads).item<float>();
  for (double clip : {norm * 2, 1e30, static_cast<double>(static_cast<float>(norm))}) {
    auto [clipped, n] = clip_by_global_norm(grads, clip);
    for (size_t i = 0; i < grads.size(); ++i)
      expect_same_bits(grads[i], clipped[i], "clip_norm " + std::to_string(clip));
  }
}

TEST(ClipByGlobalNorm, UndefinedGradientsPassThrough) {
  auto [clipped, norm] = clip_by_global_norm({Tensor(), constant({6.f, 8.f}), Tensor()}, 5.0);
  ASSERT_EQ(clipped.size(), 3u);
  EXPECT_FALSE(clipped[0].defined());
  EXPECT_FALSE(clipped[2].defined());
  EXPECT_EQ(norm.item<float>(), 10.f);
  EXPECT_EQ(clipped[1].to_vector<float>(), (std::vector<float>{3.f, 4.f}));
  auto [none, zero] = clip_by_global_norm({Tensor(), Tensor()}, 1.0);
  EXPECT_FALSE(none[0].defined());
  EXPECT_EQ(zero.item<float>(), 0.f);
  auto [empty, zero_too] = clip_by_global_norm({}, 1.0);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(zero_too.item<float>(), 0.f);
}

// An overflowed gradient makes every clipped gradient NaN, as TensorFlow's does, rather than
// scaling the others to zero.
TEST(ClipByGlobalNorm, ANonFiniteNormMakesEveryGradientNaN) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto [clipped, norm] = clip_by_global_norm({constant({1.f, bad}), constant({2.f})}, 1.0);
    EXPECT_FALSE(std::isfinite(norm.item<float>()));
    for (const Tensor& c : clipped)
      for (float x : c.to_vector<float>()) EXPECT_TRUE(std::isnan(x)) << "for " << bad;
  }
}

TEST(ClipByGlobalNorm, TracedIsOneReductionAndEqualsEager) {
  std::vector<Tensor> grads = {random::normal({8, 3}, 0, 4, 7), random::normal({100}, 0, 2, 8),
                               random::normal({2, 2, 2}, 0, 1, 9)};
  auto clip = function([](Tensor a, Tensor b, Tensor c) {
    auto [clipped, norm] = clip_by_global_norm({a, b, c}, 2.0);
    clipped.push_back(norm);
    return clipped;
  });
  const std::vector<Tensor> traced = clip(grads[0], grads[1], grads[2]);
  auto [eager, eager_norm] = clip_by_global_norm(grads, 2.0);
  for (size_t i = 0; i < 3; ++i) expect_same_bits(eager[i], traced[i], "gradient " + std::to_string(i));
  expect_same_bits(eager_norm, traced[3], "global norm");
  int reductions = 0, other = 0;
  for (const Operation& op : clip.graph(grads[0], grads[1], grads[2]).operations()) {
    reductions += op.type() == "GlobalSquaredNorm";
    other += op.type() == "Sum" || op.type() == "Square";
  }
  EXPECT_EQ(reductions, 1);
  EXPECT_EQ(other, 0);
  for (int call = 0; call < 3; ++call) clip(grads[0], grads[1], grads[2]);
  EXPECT_EQ(clip.tracing_count(), 1);
}

TEST(GlobalNorm, EagerEqualsTracedForEveryDType) {
  const std::vector<DType> dtypes = dtypes_with_kernel("GlobalSquaredNorm");
  ASSERT_EQ(dtypes.size(), 4u);
  Op op = [](const std::vector<Tensor>& in) { return global_norm(in); };
  uint32_t seed = 20;
  for (DType d : dtypes)
    for (const Shape& s : ref::unary_cases())
      expect_traced_equals_eager(op, {sample(d, s, seed++, -3, 3, false), sample(d, {5}, seed++, -3, 3, false)},
                                 "GlobalSquaredNorm", describe("global_norm", d, {s, {5}}));
}

TEST(GlobalNorm, SixteenBitIsNearFloat32) {
  for (DType d : {float16, bfloat16}) {
    const Tensor x = random::normal({1000}, 0, 1, 4);
    const double want = global_norm({x}).item<float>();
    const double got = cast(global_norm({cast(x, d)}), float32).item<float>();
    EXPECT_NEAR(got / want, 1.0, d == float16 ? 2e-3 : 1.6e-2) << dtype_name(d);
  }
}

TEST(GlobalNorm, GradientMatchesFiniteDifferences) {
  testing::expect_gradients_match(
      [](const std::vector<Tensor>& in) { return global_norm({in[0], in[1]}); },
      {random::normal({3, 4}, 0, 1, 1, float64), random::normal({5}, 0, 1, 2, float64)}, 1e-6, 1e-6, "global_norm");
  testing::expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        auto [clipped, norm] = clip_by_global_norm({in[0], in[1]}, 1.5);
        return concat({reshape(clipped[0], Shape{6}), clipped[1]}, 0);
      },
      {random::normal({2, 3}, 0, 1, 3, float64), random::normal({4}, 0, 1, 4, float64)}, 1e-6, 1e-6,
      "clip_by_global_norm");
}

TEST(ClipByGlobalNorm, BadArgumentsNameWhatIsWrong) {
  const std::vector<Tensor> grads = {constant({1.f})};
  for (double bad : {-1.0, 0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const std::string message = ref::error_message<InvalidArgument>([&] { clip_by_global_norm(grads, bad); });
    EXPECT_TRUE(ref::contains(message, "[clip_by_global_norm] clip_norm must be a positive finite number")) << message;
  }
  std::string message =
      ref::error_message<InvalidArgument>([] { clip_by_global_norm({constant({1.f}), Tensor(), constant({1.0})}, 1.0); });
  EXPECT_TRUE(ref::contains(message, "gradient 2 is float64 but gradient 0 is float32")) << message;
  message = ref::error_message<InvalidArgument>([] { global_norm({constant({1, 2})}); });
  EXPECT_TRUE(ref::contains(message, "[global_norm] tensor 0 is int32")) << message;
}

}  // namespace
}  // namespace weft
