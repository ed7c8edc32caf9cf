// Losses: values against a plain reference computed here, gradients by finite differences
// (float64) and by their closed forms.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

const std::vector<int64_t> kLabels = {2, 0, 3, 3, 1};
constexpr int64_t kBatch = 5, kClasses = 4;

Tensor labels_as(DType dtype) {
  std::vector<int64_t> l = kLabels;
  return cast(constant(l, Shape{kBatch}), dtype);
}

// Mean over examples of log(sum_j exp(x_ij)) - x_i,label, computed with long double.
double reference_xent(const std::vector<double>& x, const std::vector<int64_t>& labels, int64_t classes) {
  long double total = 0;
  const size_t n = labels.size();
  for (size_t i = 0; i < n; ++i) {
    long double mx = x[i * classes];
    for (int64_t j = 1; j < classes; ++j) mx = std::max<long double>(mx, x[i * classes + j]);
    long double z = 0;
    for (int64_t j = 0; j < classes; ++j) z += std::exp(static_cast<long double>(x[i * classes + j]) - mx);
    total += std::log(z) + mx - x[i * classes + labels[i]];
  }
  return static_cast<double>(total / n);
}

TEST(SparseSoftmaxCrossEntropy, ValueMatchesReferenceForEveryLabelType) {
  Tensor logits = random::normal({kBatch, kClasses}, 0, 2, 5, float64);
  double want = reference_xent(logits.to_vector<double>(), kLabels, kClasses);
  for (DType d : {int32, int64, uint8}) {
    Tensor loss = nn::sparse_softmax_cross_entropy(labels_as(d), logits);
    EXPECT_EQ(loss.shape(), Shape{});
    EXPECT_EQ(loss.dtype(), float64);
    EXPECT_NEAR(loss.item<double>(), want, 1e-12) << dtype_name(d);
  }
  Tensor loss32 = nn::sparse_softmax_cross_entropy(labels_as(int32), cast(logits, float32));
  EXPECT_EQ(loss32.dtype(), float32);
  EXPECT_NEAR(loss32.item<float>(), want, 1e-5);
}

TEST(SparseSoftmaxCrossEntropy, StableForLargeLogits) {
  std::vector<double> x = {1000, 0, -1000, 500, 501, 499};
  Tensor loss = nn::sparse_softmax_cross_entropy(constant({1, 1}), constant(x, Shape{2, 3}));
  EXPECT_NEAR(loss.item<double>(), reference_xent(x, {1, 1}, 3), 1e-9);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  Tensor loss32 = nn::sparse_softmax_cross_entropy(constant({0, 1}), cast(constant(x, Shape{2, 3}), float32));
  EXPECT_NEAR(loss32.item<float>(), reference_xent(x, {0, 1}, 3), 1e-4);
}

TEST(SparseSoftmaxCrossEntropy, FiniteDifferenceGradientForEveryLabelType) {
  for (DType d : {int32, int64, uint8}) {
    expect_gradients_match(
        [](auto& x) { return nn::sparse_softmax_cross_entropy(x[1], x[0]); },
        {random::normal({kBatch, kClasses}, 0, 1.5, 6, float64), labels_as(d)}, 1e-6, 1e-6,
        std::string("sparse_softmax_cross_entropy labels ") + std::string(dtype_name(d)));
  }
}

TEST(SparseSoftmaxCrossEntropy, GradientIsSoftmaxMinusOneHotOverBatch) {
  Tensor logits = random::normal({kBatch, kClasses}, 0, 1, 7, float64);
  std::vector<double> x = logits.to_vector<double>();
  GradientTape tape;
  tape.watch(logits);
  Tensor labels = labels_as(int64);
  tape.watch(labels);
  auto g = tape.gradient(nn::sparse_softmax_cross_entropy(labels, logits) * 3.0, std::vector<Tensor>{logits, labels});
  std::vector<double> got = g[0].to_vector<double>();
  for (int64_t i = 0; i < kBatch; ++i) {
    double z = 0;
    for (int64_t j = 0; j < kClasses; ++j) z += std::exp(x[i * kClasses + j]);
    for (int64_t j = 0; j < kClasses; ++j) {
      double want = 3.0 * (std::exp(x[i * kClasses + j]) / z - (j == kLabels[i] ? 1 : 0)) / kBatch;
      EXPECT_NEAR(got[i * kClasses + j], want, 1e-12) << i << "," << j;
    }
  }
  // Labels are integers: no gradient reaches them.
  EXPECT_EQ(g[1].dtype(), int64);
  for (int64_t v : g[1].to_vector<int64_t>()) EXPECT_EQ(v, 0);
}

TEST(SparseSoftmaxCrossEntropy, BadArguments) {
  Tensor logits = zeros({2, 3});
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({0, 3}), logits), InvalidArgument);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({-1, 0}), logits), InvalidArgument);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({0, 1, 2}), logits), InvalidArgument);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({0.f, 1.f}), logits), InvalidArgument);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({0, 1}), zeros({2, 3, 1})), InvalidArgument);
  EXPECT_THROW(nn::sparse_softmax_cross_entropy(constant({0, 1}), zeros({2, 3}, int32)), InvalidArgument);
  try {
    nn::sparse_softmax_cross_entropy(constant({0, 7}), logits);
    ADD_FAILURE() << "no error for label 7 of 3 classes";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find('7'), std::string::npos) << e.what();
  }
}

TEST(MeanSquaredError, ValueAndGradients) {
  Tensor y_true = random::normal({3, 4}, 0, 1, 11, float64);
  Tensor y_pred = random::normal({3, 4}, 0, 1, 12, float64);
  std::vector<double> t = y_true.to_vector<double>(), p = y_pred.to_vector<double>();
  double want = 0;
  for (size_t i = 0; i < t.size(); ++i) want += (p[i] - t[i]) * (p[i] - t[i]);
  want /= static_cast<double>(t.size());
  Tensor loss = nn::mean_squared_error(y_true, y_pred);
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(loss.item<double>(), want, 1e-14);

  GradientTape tape;
  tape.watch(y_true);
  tape.watch(y_pred);
  auto g = tape.gradient(nn::mean_squared_error(y_true, y_pred), std::vector<Tensor>{y_true, y_pred});
  std::vector<double> gt = g[0].to_vector<double>(), gp = g[1].to_vector<double>();
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_NEAR(gp[i], 2 * (p[i] - t[i]) / 12.0, 1e-14);
    EXPECT_NEAR(gt[i], -2 * (p[i] - t[i]) / 12.0, 1e-14);
  }
  expect_gradients_match([](auto& x) { return nn::mean_squared_error(x[0], x[1]); }, {y_true, y_pred}, 1e-6, 1e-6,
                         "mean_squared_error");
  expect_gradients_match([](auto& x) { return nn::mean_squared_error(x[0], x[1]); },
                         {random::normal({4}, 0, 1, 13, float64), random::normal({3, 4}, 0, 1, 14, float64)}, 1e-6,
                         1e-6, "mean_squared_error broadcast");
}

// (N,) against (N, 1) would broadcast to an (N, N) matrix of every pair and silently average
// the wrong thing; Keras squeezes, weft refuses.
TEST(MeanSquaredError, RefusesShapesThatWouldBroadcastBeyondThePrediction) {
  Tensor y_true = constant({1.0, 2.0, 3.0});
  EXPECT_THROW(nn::mean_squared_error(y_true, constant({{1.0}, {2.0}, {3.0}})), InvalidArgument);
  EXPECT_THROW(nn::mean_squared_error(constant({{1.0, 2.0}}), constant({1.0, 2.0})), InvalidArgument);
  EXPECT_THROW(nn::mean_squared_error(zeros({2, 3}), zeros({1, 3})), InvalidArgument);
  EXPECT_THROW(nn::mean_squared_error(zeros({3}), zeros({4})), InvalidArgument);
  EXPECT_DOUBLE_EQ(nn::mean_squared_error(y_true, constant({{1.0, 2.0, 5.0}, {1.0, 2.0, 3.0}})).item<double>(),
                   4.0 / 6);
  EXPECT_DOUBLE_EQ(nn::mean_squared_error(constant(2.0), constant({1.0, 3.0})).item<double>(), 1.0);
}

}  // namespace
}  // namespace weft
