// broadcast_like, reshape_like and size_of: the run-time-shape ops that gradients of graphs traced
// with unknown dims are built from.
#include <gtest/gtest.h>

#include "api/function.h"
#include "api/gradient_tape.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "gradient_check.h"

namespace weft {
namespace {

TEST(DynamicShape, BroadcastLikeMatchesBroadcastTo) {
  Tensor x = constant({1.f, 2.f, 3.f});
  Tensor like = zeros({2, 3});
  EXPECT_EQ(broadcast_like(x, like).to_vector<float>(), broadcast_to(x, {2, 3}).to_vector<float>());
  EXPECT_THROW(broadcast_like(constant({1.f, 2.f}), like), InvalidArgument);
}

TEST(DynamicShape, OpsTakeTheirShapeAtRunTimeWhenTraced) {
  auto f = function(
      [](Tensor row, Tensor like, Tensor flat) {
        return std::vector<Tensor>{broadcast_like(row, like), reshape_like(flat, like), size_of(like, float32)};
      },
      {.input_signature = {TensorSpec{float32, {3}}, TensorSpec{float32, {-1, 3}}, TensorSpec{float32, {-1}}}});
  for (int64_t rows : {1, 2, 5}) {
    const float n = static_cast<float>(3 * rows);
    Tensor like = zeros({rows, 3});
    Tensor flat = range(0.f, n);
    auto out = f(constant({7.f, 8.f, 9.f}), like, flat);
    EXPECT_EQ(out[0].shape(), (Shape{rows, 3}));
    EXPECT_EQ(out[0].to_vector<float>()[3 * rows - 1], 9.f);
    EXPECT_EQ(out[1].shape(), (Shape{rows, 3}));
    EXPECT_EQ(out[1].to_vector<float>(), flat.to_vector<float>());
    EXPECT_EQ(out[2].item<float>(), n);
  }
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(DynamicShape, BroadcastLikeEagerEqualsTraced) {
  Tensor x = constant({{1.f}, {2.f}});
  Tensor like = zeros({2, 4});
  auto f = function([](Tensor a, Tensor b) { return broadcast_like(a, b); },
                    {.input_signature = {TensorSpec{float32, {-1, 1}}, TensorSpec{float32, {-1, -1}}}});
  EXPECT_EQ(f(x, like).to_vector<float>(), broadcast_like(x, like).to_vector<float>());
}

TEST(DynamicShape, GradientsMatchFiniteDifferences) {
  Tensor like = zeros({3, 2}, float64);
  testing::expect_gradients_match([&](const std::vector<Tensor>& in) { return broadcast_like(in[0], like); },
                                  {constant({1.0, -2.0})});
  testing::expect_gradients_match([&](const std::vector<Tensor>& in) { return reshape_like(in[0], like); },
                                  {constant({1.0, 2.0, 3.0, 4.0, 5.0, 6.0})});
}

TEST(DynamicShape, ReductionGradientsWithUnknownDimsMatchEager) {
  Tensor x = reshape(range(1.0, 13.0), {3, 4});
  auto traced = function(
      [](Tensor in) {
        GradientTape tape;
        tape.watch(in);
        Tensor y = reduce_sum(reduce_mean(in * in, {0}) + reduce_max(in, {1}, true));
        return tape.gradient(y, in);
      },
      {.input_signature = {TensorSpec{float64, {-1, -1}}}});
  GradientTape tape;
  tape.watch(x);
  Tensor y = reduce_sum(reduce_mean(x * x, {0}) + reduce_max(x, {1}, true));
  Tensor eager = tape.gradient(y, x);
  auto a = traced(x).to_vector<double>(), b = eager.to_vector<double>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
}

}  // namespace
}  // namespace weft
