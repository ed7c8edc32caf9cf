// Conv2D, DepthwiseConv2D, MaxPool2D, AvgPool2D and BatchNormalization layers: shapes, values against the ops and
// plain loops, BatchNormalization's moving statistics (eager and traced), checkpoints, and a
// small CNN that trains the same eagerly and traced.
#include <gtest/gtest.h>

#include <cmath>

#include "temp_dir.h"
#include "weft/weft.h"

namespace weft {
namespace {

class ConvLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::reset_layer_names();
    random::set_seed(17);
  }
};

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST_F(ConvLayersTest, Conv2DIsConvPlusBias) {
  nn::Conv2D conv(4, {3, 2}, {.activation = nn::relu});
  EXPECT_EQ(conv.name(), "conv2d");
  Tensor x = random::normal({2, 5, 4, 3}, 0, 1, 3, float64);
  Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3, 4}));
  ASSERT_TRUE(conv.kernel().defined());
  EXPECT_EQ(conv.kernel().shape(), (Shape{3, 2, 3, 4}));
  EXPECT_EQ(conv.kernel().dtype(), float64);
  EXPECT_EQ(conv.bias().value().to_vector<double>(), std::vector<double>(4, 0.0));
  // Glorot uniform: |k| <= sqrt(6 / (fan_in + fan_out)), fan = 3*2*3 and 3*2*4.
  for (double k : conv.kernel().value().to_vector<double>()) EXPECT_LE(std::abs(k), std::sqrt(6.0 / 42));
  conv.bias().assign(constant({0.5, -0.5, 0.25, 0.0}));
  Tensor want = relu(conv2d(x, conv.kernel().value(), {1, 1}, "VALID") + conv.bias().value());
  expect_near(conv(x).to_vector<double>(), want.to_vector<double>(), 1e-12);

  // The same in plain loops (valid padding, stride 1), before the activation.
  std::vector<double> xv = x.to_vector<double>(), kv = conv.kernel().value().to_vector<double>();
  std::vector<double> bv = conv.bias().value().to_vector<double>(), loops;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t f = 0; f < 4; ++f) {
          double s = bv[f];
          for (int64_t a = 0; a < 3; ++a)
            for (int64_t b = 0; b < 2; ++b)
              for (int64_t c = 0; c < 3; ++c)
                s += xv[((n * 5 + i + a) * 4 + j + b) * 3 + c] * kv[((a * 2 + b) * 3 + c) * 4 + f];
          loops.push_back(std::max(s, 0.0));
        }
  expect_near(conv(x).to_vector<double>(), loops, 1e-12);

  // Options: same padding, strides, no bias; upper- or lower-case padding.
  nn::Conv2D strided(2, {3, 3}, {.strides = {2, 2}, .padding = "SAME", .use_bias = false});
  EXPECT_EQ(strided(x).shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(strided.variables().size(), 1u);
  EXPECT_EQ(strided.name(), "conv2d_1");
  nn::Conv2D dilated(2, {2, 2}, {.padding = "same", .dilations = {2, 2}});
  EXPECT_EQ(dilated(x).shape(), (Shape{2, 5, 4, 2}));

  EXPECT_THROW(conv(random::normal({2, 5, 4, 2}, 0, 1, 3, float64)), InvalidArgument);  // channels differ
  EXPECT_THROW(conv(random::normal({5, 4, 3}, 0, 1, 3, float64)), InvalidArgument);     // rank 3
  EXPECT_THROW(nn::Conv2D(0, {3, 3}), InvalidArgument);
  EXPECT_THROW(nn::Conv2D(2, {3}), InvalidArgument);
  EXPECT_THROW(nn::Conv2D(2, {3, 3}, {.padding = "full"}), InvalidArgument);
}

TEST_F(ConvLayersTest, DepthwiseConv2DIsDepthwiseConvPlusBias) {
  nn::DepthwiseConv2D dw({3, 3}, {.padding = "same", .depth_multiplier = 2, .activation = nn::relu});
  EXPECT_EQ(dw.name(), "depthwise_conv2d");
  Tensor x = random::normal({2, 5, 4, 3}, 0, 1, 3, float64);
  Tensor y = dw(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 4, 6}));
  ASSERT_TRUE(dw.depthwise_kernel().defined());
  EXPECT_EQ(dw.depthwise_kernel().shape(), (Shape{3, 3, 3, 2}));
  EXPECT_EQ(dw.bias().shape(), (Shape{6}));
  // Keras's Glorot limit from the kernel's shape: fan_in = 3*3*3, fan_out = 3*3*2.
  for (double k : dw.depthwise_kernel().value().to_vector<double>()) EXPECT_LE(std::abs(k), std::sqrt(6.0 / 45));
  dw.bias().assign(constant({0.5, -0.5, 0.25, 0.0, 1.0, -1.0}));
  Tensor want = relu(depthwise_conv2d(x, dw.depthwise_kernel().value(), {1, 1}, "SAME") + dw.bias().value());
  expect_near(dw(x).to_vector<double>(), want.to_vector<double>(), 1e-12);
  // Checkpoint paths as Keras names them.
  std::vector<std::string> names;
  for (const Variable& v : dw.variables()) names.push_back(v.name());
  EXPECT_EQ(names, (std::vector<std::string>{"depthwise_conv2d/depthwise_kernel", "depthwise_conv2d/bias"}));

  nn::DepthwiseConv2D strided({3, 3}, {.strides = {2, 2}, .use_bias = false});
  EXPECT_EQ(strided(x).shape(), (Shape{2, 2, 1, 3}));
  EXPECT_EQ(strided.variables().size(), 1u);
  EXPECT_THROW(dw(random::normal({2, 5, 4, 2}, 0, 1, 3, float64)), InvalidArgument);  // channels differ
  EXPECT_THROW(nn::DepthwiseConv2D({3, 3}, {.depth_multiplier = 0}), InvalidArgument);
  EXPECT_THROW(nn::DepthwiseConv2D({3, 3}, {.padding = "full"}), InvalidArgument);
  try {
    nn::DepthwiseConv2D({3, 3}, {.depth_multiplier = -1});
    ADD_FAILURE() << "a negative depth_multiplier was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[DepthwiseConv2D] depth_multiplier"), std::string::npos) << e.what();
  }
}

TEST_F(ConvLayersTest, PoolingLayers) {
  Tensor x = reshape(range(0.f, 32.f), {2, 4, 4, 1});
  nn::MaxPool2D max_pool({2, 2});
  nn::AvgPool2D avg_pool({2, 2});
  EXPECT_EQ(max_pool.name(), "max_pooling2d");
  EXPECT_EQ(avg_pool.name(), "average_pooling2d");
  EXPECT_EQ(max_pool(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15, 21, 23, 29, 31}));
  EXPECT_EQ(avg_pool(x).to_vector<float>(), (std::vector<float>{2.5, 4.5, 10.5, 12.5, 18.5, 20.5, 26.5, 28.5}));
  EXPECT_EQ(nn::MaxPool2D({3, 3}, {1, 1}, "same")(x).shape(), (Shape{2, 4, 4, 1}));
  EXPECT_EQ(nn::AvgPool2D({3, 3}, {2, 2})(x).shape(), (Shape{2, 1, 1, 1}));
  EXPECT_TRUE(max_pool.variables().empty());
  EXPECT_THROW(nn::MaxPool2D({2, 0}), InvalidArgument);
  EXPECT_THROW(max_pool(zeros({4, 4})), InvalidArgument);
}

// x: (4, 1, 2, 2): channel 0 holds 1..8, channel 1 holds 10, 20, ..., 80.
Tensor bn_batch(double shift) {
  std::vector<double> v;
  for (int i = 1; i <= 8; ++i) {
    v.push_back(i + shift);
    v.push_back(10.0 * i + shift);
  }
  return constant(v, Shape{4, 1, 2, 2});
}

// Per channel mean and (biased) variance of bn_batch.
std::pair<std::vector<double>, std::vector<double>> bn_stats(double shift) {
  std::vector<double> mean{4.5 + shift, 45 + shift}, var{0, 0};
  for (int i = 1; i <= 8; ++i) {
    var[0] += (i + shift - mean[0]) * (i + shift - mean[0]) / 8;
    var[1] += (10.0 * i + shift - mean[1]) * (10.0 * i + shift - mean[1]) / 8;
  }
  return {mean, var};
}

TEST_F(ConvLayersTest, BatchNormalizationMovingStatistics) {
  nn::BatchNormalization bn({.momentum = 0.9, .epsilon = 1e-3});
  EXPECT_EQ(bn.name(), "batch_normalization");
  Tensor x = bn_batch(0);
  Tensor y = bn(x, /*training=*/true);
  auto [mean, var] = bn_stats(0);
  // Normalised by the batch's biased variance.
  std::vector<double> xv = x.to_vector<double>(), want;
  for (size_t i = 0; i < xv.size(); ++i) want.push_back((xv[i] - mean[i % 2]) / std::sqrt(var[i % 2] + 1e-3));
  expect_near(y.to_vector<double>(), want, 1e-9);
  // Moving averages: moving * 0.9 + batch * 0.1, the variance with Bessel's correction (n = 8).
  std::vector<double> mm{0.1 * mean[0], 0.1 * mean[1]};
  std::vector<double> mv{0.9 + 0.1 * var[0] * 8 / 7, 0.9 + 0.1 * var[1] * 8 / 7};
  expect_near(bn.moving_mean().value().to_vector<double>(), mm, 1e-12);
  expect_near(bn.moving_variance().value().to_vector<double>(), mv, 1e-12);
  // A second batch moves them again.
  bn(bn_batch(3), true);
  auto [mean2, var2] = bn_stats(3);
  for (int c = 0; c < 2; ++c) {
    mm[c] = 0.9 * mm[c] + 0.1 * mean2[c];
    mv[c] = 0.9 * mv[c] + 0.1 * var2[c] * 8 / 7;
  }
  expect_near(bn.moving_mean().value().to_vector<double>(), mm, 1e-12);
  expect_near(bn.moving_variance().value().to_vector<double>(), mv, 1e-12);

  // Inference uses them, with gamma and beta, and changes nothing.
  bn.gamma().assign(constant({2.0, 0.5}));
  bn.beta().assign(constant({1.0, -1.0}));
  std::vector<double> inf;
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = i % 2;
    inf.push_back((xv[i] - mm[c]) / std::sqrt(mv[c] + 1e-3) * (c ? 0.5 : 2.0) + (c ? -1.0 : 1.0));
  }
  expect_near(bn(x, false).to_vector<double>(), inf, 1e-9);
  expect_near(bn.moving_mean().value().to_vector<double>(), mm, 1e-12);

  // Variables: gamma and beta trainable, the moving statistics not.
  EXPECT_EQ(bn.variables().size(), 4u);
  ASSERT_EQ(bn.trainable_variables().size(), 2u);
  EXPECT_EQ(bn.trainable_variables()[0].id(), bn.gamma().id());
  EXPECT_FALSE(bn.moving_mean().trainable());
  std::vector<std::string> paths;
  for (auto& [p, v] : bn.named_variables()) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"gamma", "beta", "moving_mean", "moving_variance"}));
  nn::BatchNormalization plain({.center = false, .scale = false});
  plain(x, true);
  EXPECT_EQ(plain.variables().size(), 2u);
  EXPECT_TRUE(plain.trainable_variables().empty());
  EXPECT_THROW(bn(zeros({2, 3}, float64)), InvalidArgument);  // built for 2 channels
}

TEST_F(ConvLayersTest, BatchNormalizationUpdatesInsideAFunction) {
  nn::BatchNormalization eager({.momentum = 0.8}), traced({.momentum = 0.8});
  eager(bn_batch(0), true);
  traced(bn_batch(0), true);  // built eagerly, as after a first eager step
  auto step = function([&](Tensor x) { return traced(x, true); });
  auto step_unknown_batch = function([&](Tensor x) { return traced(x, true); },
                                     {.input_signature = {TensorSpec{float64, {-1, 1, 2, 2}}}});
  for (double shift : {1.0, 2.0, 5.0}) {
    Tensor want = eager(bn_batch(shift), true);
    Tensor got = shift == 2.0 ? step_unknown_batch(bn_batch(shift)) : step(bn_batch(shift));
    expect_near(got.to_vector<double>(), want.to_vector<double>(), 1e-9);
    expect_near(traced.moving_mean().value().to_vector<double>(), eager.moving_mean().value().to_vector<double>(), 1e-12);
    expect_near(traced.moving_variance().value().to_vector<double>(),
                eager.moving_variance().value().to_vector<double>(), 1e-12);
  }
  EXPECT_EQ(step.tracing_count(), 1);
}

TEST_F(ConvLayersTest, BatchNormalizationCheckpointRoundTrip) {
  testing::TempDir dir("weft_bn");
  nn::BatchNormalization bn;
  bn(bn_batch(0), true);
  bn.gamma().assign(constant({1.5, 0.5}));
  Checkpoint ckpt({{"bn", bn}});
  std::vector<std::string> paths;
  for (auto& [p, v] : ckpt.variables()) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"}));
  ckpt.save(dir.file("bn.safetensors"));
  Tensor want = bn(bn_batch(1), false);

  // Deferred: restored before the first call, applied when the variables are built.
  nn::BatchNormalization later;
  RestoreReport r = Checkpoint({{"bn", later}}).restore(dir.file("bn.safetensors"));
  EXPECT_EQ(r.deferred.size(), 4u);
  EXPECT_EQ(later(bn_batch(1), false).to_vector<double>(), want.to_vector<double>());
  EXPECT_EQ(later.moving_variance().value().to_vector<double>(), bn.moving_variance().value().to_vector<double>());
}

class ReluImpl final : public nn::ModuleImpl {
 public:
  ReluImpl() : nn::ModuleImpl("relu") {}
  Tensor call(const Tensor& x, bool) override { return relu(x); }
};

// Conv2D -> BatchNormalization -> relu -> MaxPool2D -> Flatten -> Dense, on 8x8 images.
nn::Sequential small_cnn() {
  return nn::Sequential{nn::Conv2D(4, {3, 3}, {.padding = "same"}), nn::BatchNormalization(),
                        nn::Module(std::make_shared<ReluImpl>()), nn::MaxPool2D({2, 2}), nn::Flatten(),
                        nn::Dense(3)};
}

TEST_F(ConvLayersTest, SmallCnnTrainsTheSameEagerlyAndTraced) {
  Tensor x = random::normal({6, 8, 8, 2}, 0, 1, 31);
  Tensor labels = constant(std::vector<int32_t>{0, 1, 2, 0, 1, 2}, Shape{6});
  nn::Sequential eager = small_cnn(), traced = small_cnn();
  eager(x, false);
  traced(x, false);
  std::vector<std::string> paths;
  for (auto& [p, v] : eager.named_variables()) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "batch_normalization/gamma",
                                             "batch_normalization/beta", "batch_normalization/moving_mean",
                                             "batch_normalization/moving_variance", "dense/kernel", "dense/bias"}));
  // The same starting point.
  std::vector<Variable> ev = eager.variables(), tv = traced.variables();
  ASSERT_EQ(ev.size(), tv.size());
  for (size_t i = 0; i < ev.size(); ++i) tv[i].assign(ev[i].value());

  auto step_body = [&](nn::Sequential& model, optim::SGD& opt, const Tensor& xb, const Tensor& yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, model(xb, true));
    std::vector<Variable> vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  optim::SGD opt_e(0.1), opt_t(0.1);
  auto traced_step = function([&](Tensor xb, Tensor yb) { return step_body(traced, opt_t, xb, yb); });
  std::vector<float> eager_losses, traced_losses;
  for (int s = 0; s < 6; ++s) {
    eager_losses.push_back(step_body(eager, opt_e, x, labels).item<float>());
    traced_losses.push_back(traced_step(x, labels).item<float>());
  }
  EXPECT_EQ(traced_step.tracing_count(), 1);
  EXPECT_LT(eager_losses.back(), eager_losses.front());
  for (size_t s = 0; s < eager_losses.size(); ++s) EXPECT_NEAR(traced_losses[s], eager_losses[s], 1e-4) << s;
  // The moving statistics moved the same way in both.
  for (size_t k : {4u, 5u}) {
    std::vector<float> a = tv[k].value().to_vector<float>(), b = ev[k].value().to_vector<float>();
    expect_near(std::vector<double>(a.begin(), a.end()), std::vector<double>(b.begin(), b.end()), 1e-4);
  }
}

}  // namespace
}  // namespace weft
