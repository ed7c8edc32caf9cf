// nn layers: Dense, Dropout, Sequential, and the Module handle they share.
#include <gtest/gtest.h>

#include <cmath>

#include "weft/weft.h"

namespace weft {
namespace {

// x (n, in) @ k (in, out) + b, in plain loops.
std::vector<double> affine(const std::vector<double>& x, const std::vector<double>& k, const std::vector<double>& b,
                           int64_t n, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double s = b[j];
      for (int64_t p = 0; p < in; ++p) s += x[i * in + p] * k[p * out + j];
      y[i * out + j] = s;
    }
  return y;
}

class LayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::reset_layer_names();
    random::set_seed(11);
  }
};

TEST_F(LayersTest, DenseBuildsOnFirstCall) {
  nn::Dense dense(4);
  EXPECT_EQ(dense.name(), "dense");
  EXPECT_FALSE(dense.kernel().defined());
  EXPECT_TRUE(dense.variables().empty());
  Tensor x = random::normal({5, 3}, 0, 1, 1, float64);
  Tensor y = dense(x);
  ASSERT_TRUE(dense.kernel().defined());
  EXPECT_EQ(dense.kernel().shape(), (Shape{3, 4}));
  EXPECT_EQ(dense.kernel().dtype(), float64);
  EXPECT_EQ(dense.bias().shape(), (Shape{4}));
  EXPECT_EQ(dense.bias().value().to_vector<double>(), std::vector<double>(4, 0.0));
  EXPECT_EQ(dense.kernel().name(), "dense/kernel");
  EXPECT_EQ(dense.bias().name(), "dense/bias");
  EXPECT_EQ(y.shape(), (Shape{5, 4}));

  dense.bias().assign(constant({0.5, -1.0, 2.0, 0.0}));
  std::vector<double> want = affine(x.to_vector<double>(), dense.kernel().value().to_vector<double>(),
                                    dense.bias().value().to_vector<double>(), 5, 3, 4);
  std::vector<double> got = dense(x).to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
  // Built once: later calls reuse the same variables.
  auto vars = dense.variables();
  dense(x);
  ASSERT_EQ(dense.variables().size(), 2u);
  EXPECT_EQ(dense.variables()[0].id(), vars[0].id());
  EXPECT_EQ(dense.variables()[1].id(), vars[1].id());
}

TEST_F(LayersTest, DenseGlorotUniformBounds) {
  nn::Dense dense(30);
  dense(zeros({1, 50}));
  const double limit = std::sqrt(6.0 / (50 + 30));
  std::vector<float> k = dense.kernel().value().to_vector<float>();
  ASSERT_EQ(k.size(), 1500u);
  double lo = 0, hi = 0, sum = 0, sq = 0;
  for (float v : k) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    sum += v;
    sq += double(v) * v;
  }
  EXPECT_GE(lo, -limit);
  EXPECT_LE(hi, limit);
  EXPECT_LT(lo, -0.95 * limit) << "samples should reach near the bound";
  EXPECT_GT(hi, 0.95 * limit);
  EXPECT_NEAR(sum / 1500, 0.0, 0.03);
  EXPECT_NEAR(sq / 1500, limit * limit / 3, 0.1 * limit * limit / 3);  // variance of U(-l, l)
}

TEST_F(LayersTest, DenseAppliesItsActivation) {
  nn::Dense dense(6, nn::relu);
  Tensor x = random::normal({4, 3}, 0, 1, 2, float64);
  std::vector<double> y = dense(x).to_vector<double>();
  std::vector<double> lin = affine(x.to_vector<double>(), dense.kernel().value().to_vector<double>(),
                                   std::vector<double>(6, 0.0), 4, 3, 6);
  int negatives = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], std::max(0.0, lin[i]), 1e-12);
    negatives += lin[i] < 0;
  }
  EXPECT_GT(negatives, 0) << "the test should exercise the activation";
  nn::Dense sig(2, [](const Tensor& t) { return sigmoid(t) * 2.0; });
  std::vector<double> s = sig(x).to_vector<double>();
  std::vector<double> ls = affine(x.to_vector<double>(), sig.kernel().value().to_vector<double>(), {0, 0}, 4, 3, 2);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], 2 / (1 + std::exp(-ls[i])), 1e-12);
}

TEST_F(LayersTest, DenseOnRank3AppliesToTheLastAxis) {
  nn::Dense dense(4);
  Tensor x = random::normal({2, 5, 3}, 0, 1, 3, float64);
  Tensor y = dense(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(dense.kernel().shape(), (Shape{3, 4}));
  std::vector<double> want = affine(x.to_vector<double>(), dense.kernel().value().to_vector<double>(),
                                    std::vector<double>(4, 0.0), 10, 3, 4);
  std::vector<double> got = y.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
  EXPECT_EQ(dense(random::normal({7, 3}, 0, 1, 4, float64)).shape(), (Shape{7, 4}));
  EXPECT_EQ(dense(random::normal({3}, 0, 1, 4, float64)).shape(), (Shape{4}));
}

TEST_F(LayersTest, DenseErrors) {
  nn::Dense dense(4);
  dense(zeros({2, 3}));
  try {
    dense(zeros({2, 5}));
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dense"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dense(zeros({2, 3, 5})), InvalidArgument);
  EXPECT_THROW(dense(constant(1.f)), InvalidArgument);
  EXPECT_THROW(nn::Dense(2)(zeros({2, 3}, int32)), InvalidArgument);
  EXPECT_THROW(nn::Dense(0), InvalidArgument);
  EXPECT_THROW(nn::Dense(-3), InvalidArgument);
  EXPECT_THROW(nn::Module()(zeros({1})), FailedPrecondition);
}

TEST_F(LayersTest, DenseWithoutBias) {
  nn::Dense dense(3, nullptr, /*use_bias=*/false);
  Tensor x = random::normal({2, 2}, 0, 1, 5, float64);
  Tensor y = dense(x);
  EXPECT_FALSE(dense.bias().defined());
  ASSERT_EQ(dense.variables().size(), 1u);
  std::vector<double> want =
      affine(x.to_vector<double>(), dense.kernel().value().to_vector<double>(), {0, 0, 0}, 2, 2, 3);
  std::vector<double> got = y.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
}

TEST_F(LayersTest, NamesAreUniqueAndVariablesInStableOrder) {
  nn::Sequential model{nn::Dense(8, nn::relu), nn::Dropout(0.5), nn::Dense(3)};
  nn::Dense extra(2);
  EXPECT_EQ(model.name(), "sequential");
  EXPECT_EQ(model.layers()[0].name(), "dense");
  EXPECT_EQ(model.layers()[1].name(), "dropout");
  EXPECT_EQ(model.layers()[2].name(), "dense_1");
  EXPECT_EQ(extra.name(), "dense_2");
  EXPECT_TRUE(model.trainable_variables().empty());
  model(zeros({1, 5}));
  std::vector<std::string> names;
  for (const Variable& v : model.trainable_variables()) names.push_back(v.name());
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"}));
  auto a = model.trainable_variables();
  auto b = model.variables();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].id(), b[i].id());
  EXPECT_EQ(a[0].shape(), (Shape{5, 8}));
  EXPECT_EQ(a[2].shape(), (Shape{8, 3}));
  nn::reset_layer_names();
  EXPECT_EQ(nn::Dense(1).name(), "dense");
  EXPECT_EQ(nn::unique_layer_name("dense"), "dense_1");
}

TEST_F(LayersTest, DropoutIsTheIdentityWhenNotTraining) {
  nn::Dropout drop(0.5);
  Tensor x = random::normal({10, 10}, 0, 1, 6);
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(drop(x, /*training=*/false).to_vector<float>(), x.to_vector<float>());
  nn::Dropout none(0.0);
  EXPECT_EQ(none(x, /*training=*/true).to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(drop.variables().empty());
  EXPECT_THROW(nn::Dropout(1.0), InvalidArgument);
  EXPECT_THROW(nn::Dropout(-0.1), InvalidArgument);
}

TEST_F(LayersTest, DropoutWhileTrainingZeroesAboutRateAndScalesTheRest) {
  for (double rate : {0.2, 0.5, 0.8}) {
    nn::Dropout drop(rate);
    Tensor x = random::uniform({100, 100}, 1, 2, 7);
    std::vector<float> in = x.to_vector<float>();
    std::vector<float> out = drop(x, /*training=*/true).to_vector<float>();
    int zeros = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (out[i] == 0) {
        ++zeros;
      } else {
        EXPECT_NEAR(out[i], in[i] / (1 - rate), 1e-5) << i;
      }
    }
    EXPECT_NEAR(zeros / 10000.0, rate, 0.03) << "rate " << rate;
  }
}

TEST_F(LayersTest, DropoutMasksAreSeededAndChangeEachCall) {
  Tensor x = ones({1000});
  nn::Dropout a(0.5, 42), b(0.5, 42);
  std::vector<float> a1 = a(x, true).to_vector<float>(), b1 = b(x, true).to_vector<float>();
  std::vector<float> a2 = a(x, true).to_vector<float>();
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a1, a2);
  // The gradient goes through the kept elements with the same scale.
  nn::Dropout c(0.25, 3);
  GradientTape tape;
  tape.watch(x);
  Tensor y = c(x, true);
  std::vector<float> g = tape.gradient(reduce_sum(y), x).to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(g[i], yv[i] == 0 ? 0.f : 1 / 0.75f);
}

// A layer that records the order it ran in and whether it was training.
class Probe final : public nn::ModuleImpl {
 public:
  Probe(std::vector<std::string>* log, double add, double scale)
      : nn::ModuleImpl("probe"), log_(log), add_(add), scale_(scale), frozen_(constant(1.0), "probe/frozen", false) {}
  Tensor call(const Tensor& x, bool training) override {
    log_->push_back(std::to_string(static_cast<int>(add_)) + (training ? "T" : "F"));
    return (x + add_) * scale_;
  }
  std::vector<Variable> variables() const override { return {frozen_}; }

 private:
  std::vector<std::string>* log_;
  double add_, scale_;
  Variable frozen_;
};

TEST_F(LayersTest, SequentialCallsInOrderAndCollectsVariables) {
  std::vector<std::string> log;
  nn::Module p1(std::make_shared<Probe>(&log, 1, 2)), p2(std::make_shared<Probe>(&log, 3, 10));
  nn::Sequential model{p1, p2};
  Tensor y = model(constant({0.0, 1.0}), /*training=*/true);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{50, 70}));  // ((x + 1) * 2 + 3) * 10
  EXPECT_EQ(log, (std::vector<std::string>{"1T", "3T"}));
  model(constant({0.0}));
  EXPECT_EQ(log.back(), "3F");
  EXPECT_EQ(model.variables().size(), 2u);
  EXPECT_TRUE(model.trainable_variables().empty());

  nn::Dense dense(2);
  model.add(dense);
  EXPECT_EQ(model.layers().size(), 3u);
  model(constant({{0.0, 1.0}}));
  auto vars = model.trainable_variables();
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].id(), dense.kernel().id());
  EXPECT_EQ(vars[1].id(), dense.bias().id());
  EXPECT_EQ(model.variables().size(), 4u);
  // Nested models flatten in order.
  nn::Sequential outer{model, nn::Dense(1)};
  outer(constant({{0.0, 1.0}}));
  EXPECT_EQ(outer.trainable_variables().size(), 4u);
  EXPECT_EQ(outer.trainable_variables()[0].id(), dense.kernel().id());
  EXPECT_THROW(nn::Sequential({nn::Module()}), InvalidArgument);
  EXPECT_THROW(model.add(nn::Module()), InvalidArgument);
}

// The gradient of a whole model with respect to each of its variables, against central
// differences taken by assigning perturbed values to the variables.
TEST_F(LayersTest, ModelGradientsMatchFiniteDifferences) {
  nn::Sequential model{nn::Dense(5, nn::tanh), nn::Dense(3, nn::sigmoid), nn::Dense(2)};
  Tensor x = random::normal({4, 3}, 0, 1, 8, float64);
  Tensor w = random::uniform({4, 2}, 0.5, 1.5, 9, float64);
  auto objective = [&] { return reduce_sum(model(x) * w); };
  objective();
  std::vector<Variable> vars = model.trainable_variables();
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    grads = tape.gradient(objective(), vars);
  }
  const double eps = 1e-6;
  for (size_t k = 0; k < vars.size(); ++k) {
    std::vector<double> base = vars[k].value().to_vector<double>();
    std::vector<double> got = grads[k].to_vector<double>();
    ASSERT_EQ(got.size(), base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      auto at = [&](double delta) {
        std::vector<double> v = base;
        v[i] += delta;
        vars[k].assign(constant(v, vars[k].shape()));
        return objective().item<double>();
      };
      double numeric = (at(eps) - at(-eps)) / (2 * eps);
      EXPECT_NEAR(got[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << vars[k].name() << " element " << i;
    }
    vars[k].assign(constant(base, vars[k].shape()));
  }
}

// Dense applies its kernel to rank-3 inputs through reshape, so this also differentiates Reshape.
TEST_F(LayersTest, DenseOnRank3Gradient) {
  nn::Dense dense(3, nn::tanh);
  Tensor x = random::normal({2, 4, 5}, 0, 1, 12, float64);
  Tensor w = random::uniform({2, 4, 3}, 0.5, 1.5, 13, float64);
  dense(x);
  std::vector<Variable> vars = dense.variables();
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    Tensor y = reduce_sum(dense(x) * w);
    grads = tape.gradient(y, vars);
  }
  // Reference: the same layer applied to the (8, 5) matrix of rows.
  Tensor rows = reshape(x, {8, 5});
  GradientTape tape;
  Tensor y2 = reduce_sum(tanh(matmul(rows, vars[0]) + vars[1]) * reshape(w, {8, 3}));
  std::vector<Tensor> want = tape.gradient(y2, vars);
  for (size_t k = 0; k < vars.size(); ++k) {
    std::vector<double> a = grads[k].to_vector<double>(), b = want[k].to_vector<double>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << vars[k].name() << " " << i;
  }
}

}  // namespace
}  // namespace weft
