// nn::LayerNormalization: built on the first call (gamma ones, beta zeros, of the last
// dimension), values against the formula, names and checkpoint paths, options and errors; a
// model with it trains, the same eagerly, traced, in a Session and under DataParallel; checkpoints
// restore it, before and after it is built.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "weft/weft.h"

namespace weft {
namespace {

class LayerNormalizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::reset_layer_names();
    random::set_seed(23);
  }
};

std::vector<std::string> paths_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [p, v] : m.named_variables()) out.push_back(p);
  return out;
}

// Each row of x ([rows, n] in memory) normalised, times g, plus b, in plain loops.
std::vector<double> formula(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b,
                            double eps) {
  const size_t n = g.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < n; ++j) mean += x[r * n + j] / static_cast<double>(n);
    for (size_t j = 0; j < n; ++j) var += std::pow(x[r * n + j] - mean, 2) / static_cast<double>(n);
    for (size_t j = 0; j < n; ++j) y[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  }
  return y;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

TEST_F(LayerNormalizationTest, BuildsOnTheFirstCallAndNormalisesTheLastAxis) {
  nn::LayerNormalization ln;
  EXPECT_EQ(ln.name(), "layer_normalization");
  EXPECT_FALSE(ln.gamma().defined());
  const Tensor x = random::normal({2, 3, 6}, 1, 2, 3, float64);
  const Tensor y = ln(x);
  EXPECT_EQ(y.shape(), x.shape());
  ASSERT_TRUE(ln.gamma().defined());
  EXPECT_EQ(ln.gamma().shape(), (Shape{6}));
  EXPECT_EQ(ln.gamma().dtype(), float64);
  EXPECT_EQ(ln.gamma().value().to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(ln.beta().value().to_vector<double>(), std::vector<double>(6, 0.0));
  // Default epsilon 1e-5, over the last axis; training or not, the same.
  EXPECT_EQ(y.to_vector<double>(), layer_norm(x, ones({6}, float64), zeros({6}, float64), -1, 1e-5).to_vector<double>());
  EXPECT_EQ(ln(x, true).to_vector<double>(), y.to_vector<double>());
  ln.gamma().assign(constant({2.0, 0.5, 1.0, -1.0, 3.0, 0.25}));
  ln.beta().assign(constant({1.0, -1.0, 0.0, 0.5, 2.0, -3.0}));
  expect_near(ln(x).to_vector<double>(),
              formula(x.to_vector<double>(), ln.gamma().value().to_vector<double>(),
                      ln.beta().value().to_vector<double>(), 1e-5),
              1e-12);

  // Both trainable, named as Keras names them.
  EXPECT_EQ(paths_of(ln), (std::vector<std::string>{"gamma", "beta"}));
  ASSERT_EQ(ln.trainable_variables().size(), 2u);
  EXPECT_EQ(ln.gamma().name(), "layer_normalization/gamma");
  EXPECT_EQ(ln.beta().name(), "layer_normalization/beta");
  EXPECT_EQ(nn::LayerNormalization().name(), "layer_normalization_1");
  nn::Sequential model{nn::Dense(4), nn::LayerNormalization({.epsilon = 1e-3})};
  model(random::normal({2, 3}, 0, 1, 4));
  EXPECT_EQ(paths_of(model), (std::vector<std::string>{"dense/kernel", "dense/bias", "layer_normalization/gamma",
                                                       "layer_normalization/beta"}));

  // Another last dimension after the build, scalars, integers and a bad epsilon are refused.
  EXPECT_THROW(ln(zeros({2, 5}, float64)), InvalidArgument);
  EXPECT_THROW(nn::LayerNormalization()(constant(1.f)), InvalidArgument);
  EXPECT_THROW(nn::LayerNormalization()(zeros({2, 3}, int32)), InvalidArgument);
  for (double eps : {0.0, -1.0, static_cast<double>(NAN)}) EXPECT_THROW(nn::LayerNormalization({.epsilon = eps}), InvalidArgument);
}

TEST_F(LayerNormalizationTest, OptionsAndHalfInputs) {
  const Tensor x = random::normal({4, 5}, 3, 2, 5, float64);
  nn::LayerNormalization plain({.epsilon = 1e-3, .center = false, .scale = false});
  expect_near(plain(x).to_vector<double>(),
              formula(x.to_vector<double>(), std::vector<double>(5, 1.0), std::vector<double>(5, 0.0), 1e-3), 1e-12);
  EXPECT_TRUE(plain.variables().empty());
  EXPECT_FALSE(plain.gamma().defined());
  nn::LayerNormalization no_beta({.center = false});
  no_beta(x);
  EXPECT_EQ(paths_of(no_beta), (std::vector<std::string>{"gamma"}));

  // 16-bit inputs keep float32 parameters; the output keeps the input's dtype.
  nn::LayerNormalization half;
  const Tensor y = half(cast(x, bfloat16));
  EXPECT_EQ(y.dtype(), bfloat16);
  EXPECT_EQ(half.gamma().dtype(), float32);
  expect_near(cast(y, float64).to_vector<double>(),
              formula(cast(cast(x, bfloat16), float64).to_vector<double>(), std::vector<double>(5, 1.0),
                      std::vector<double>(5, 0.0), 1e-5),
              2e-2);
}

// Dense -> LayerNormalization -> Dense, on 5 features and 3 classes.
nn::Sequential small_model() { return nn::Sequential{nn::Dense(8), nn::LayerNormalization(), nn::Dense(3)}; }
Tensor features() { return random::normal({6, 5}, 0, 1, 31); }
Tensor labels() { return constant(std::vector<int32_t>{0, 1, 2, 0, 1, 2}, Shape{6}); }

// Fixed starting values for every variable, so models built apart start alike.
void set_variables(const nn::Module& m) {
  int64_t seed = 500;
  for (Variable v : m.trainable_variables()) v.restore(random::normal(v.shape(), 0.5, 0.4, seed++));
}

Tensor train_step(const nn::Module& model, optim::SGD& opt, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
  std::vector<Variable> vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> variables;
};

std::vector<std::vector<float>> values_of(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Variable& v : m.variables()) out.push_back(v.value().to_vector<float>());
  return out;
}

constexpr int kSteps = 6;

Trained train_eagerly() {
  nn::Sequential model = small_model();
  model(features());
  set_variables(model);
  optim::SGD opt(0.2);
  Trained t;
  for (int i = 0; i < kSteps; ++i) t.losses.push_back(train_step(model, opt, features(), labels()).item<float>());
  t.variables = values_of(model);
  return t;
}

void expect_same_training(const Trained& got, const Trained& want, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  for (size_t i = 0; i < want.losses.size(); ++i) EXPECT_NEAR(got.losses[i], want.losses[i], 1e-5) << what << " step " << i;
  ASSERT_EQ(got.variables.size(), want.variables.size()) << what;
  for (size_t v = 0; v < want.variables.size(); ++v) {
    ASSERT_EQ(got.variables[v].size(), want.variables[v].size()) << what;
    for (size_t i = 0; i < want.variables[v].size(); ++i)
      EXPECT_NEAR(got.variables[v][i], want.variables[v][i], 1e-5) << what << " variable " << v << " element " << i;
  }
}

TEST_F(LayerNormalizationTest, TrainsTheSameEagerlyTracedInASessionAndDataParallel) {
  const Trained eager = train_eagerly();
  EXPECT_LT(eager.losses.back(), eager.losses.front() - 0.05f) << "the model did not learn";
  // gamma and beta (variables 2 and 3) moved away from where they started.
  {
    nn::Sequential start = small_model();
    start(features());
    set_variables(start);
    const std::vector<std::vector<float>> before = values_of(start);
    for (size_t v : {2u, 3u}) EXPECT_NE(eager.variables[v], before[v]) << "variable " << v << " did not train";
  }

  {  // weft::function
    nn::Sequential model = small_model();
    model(features());
    set_variables(model);
    optim::SGD opt(0.2);
    auto step = function([&](Tensor x, Tensor y) { return train_step(model, opt, x, y); });
    Trained t;
    for (int i = 0; i < kSteps; ++i) t.losses.push_back(step(features(), labels()).item<float>());
    t.variables = values_of(model);
    EXPECT_EQ(step.tracing_count(), 1);
    expect_same_training(t, eager, "traced");
  }

  {  // a TF1 graph run by a Session
    nn::Sequential model = small_model();
    optim::SGD opt(0.2);
    Graph g;
    Tensor x, y, loss;
    Operation train;
    {
      GraphScope scope(g);
      x = placeholder(float32, {-1, 5}, "x");
      y = placeholder(int32, {-1}, "y");
      GradientTape tape;
      loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
      auto vars = model.trainable_variables();
      train = opt.apply_gradients(tape.gradient(loss, vars), vars);
    }
    set_variables(model);  // before the first run: the Session keeps restored values
    Session sess(g);
    Trained t;
    for (int i = 0; i < kSteps; ++i)
      t.losses.push_back(sess.run({{x, features()}, {y, labels()}}, {loss}, {train})[0].item<float>());
    t.variables = values_of(model);
    expect_same_training(t, eager, "Session");
  }

  {  // DataParallel: a replica per GPU, else one on the CPU (tests/logical_cpus runs four)
    Cluster cluster;
    distribute::DataParallel dp(cluster);
    nn::Sequential model = small_model();
    model(features());
    set_variables(model);
    optim::SGD opt(0.2);
    auto step = dp.function([&](Tensor x, Tensor y) { return train_step(model, opt, x, y); });
    Trained t;
    for (int i = 0; i < kSteps; ++i) t.losses.push_back(step(features(), labels()).item<float>());
    t.variables = values_of(model);
    expect_same_training(t, eager, "DataParallel");
  }
}

TEST_F(LayerNormalizationTest, CheckpointRoundTrip) {
  testing::TempDir dir("weft_ln");
  const Tensor x = random::normal({3, 4}, 2, 3, 7);
  nn::LayerNormalization ln;
  ln(x);
  ln.gamma().assign(constant({1.5f, 0.5f, 2.f, -1.f}));
  ln.beta().assign(constant({0.25f, -0.5f, 1.f, 0.f}));
  Checkpoint ckpt({{"ln", ln}});
  std::vector<std::string> paths;
  for (auto& [p, v] : ckpt.variables()) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"ln/gamma", "ln/beta"}));
  ckpt.save(dir.file("ln.safetensors"));
  const Tensor want = ln(x);

  // Deferred: restored before the first call, applied when the variables are built.
  nn::LayerNormalization later;
  RestoreReport r = Checkpoint({{"ln", later}}).restore(dir.file("ln.safetensors"));
  EXPECT_EQ(r.deferred.size(), 2u);
  EXPECT_EQ(later(x).to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(later.gamma().value().to_vector<float>(), ln.gamma().value().to_vector<float>());

  // Into a built layer: immediate.
  nn::LayerNormalization built;
  built(x);
  Checkpoint({{"ln", built}}).restore(dir.file("ln.safetensors"));
  EXPECT_EQ(built.beta().value().to_vector<float>(), ln.beta().value().to_vector<float>());
  EXPECT_EQ(built(x).to_vector<float>(), want.to_vector<float>());
}

}  // namespace
}  // namespace weft
