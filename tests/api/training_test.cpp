// End to end: small models learn small problems with the whole stack (layers, loss, tape,
// optimizer, dataset), deterministically.
#include <gtest/gtest.h>

#include "weft/weft.h"

namespace weft {
namespace {

double accuracy(const Tensor& logits, const Tensor& labels) {
  std::vector<int64_t> pred = argmax(logits, 1).to_vector<int64_t>();
  std::vector<int32_t> want = labels.to_vector<int32_t>();
  int hits = 0;
  for (size_t i = 0; i < pred.size(); ++i) hits += pred[i] == want[i];
  return static_cast<double>(hits) / static_cast<double>(pred.size());
}

// Trains until every training example is classified right; returns the steps it took (or -1).
template <class Step>
int train_until_perfect(int max_steps, Step step) {
  for (int i = 1; i <= max_steps; ++i)
    if (step() == 1.0) return i;
  return -1;
}

TEST(Training, MlpLearnsXor) {
  nn::reset_layer_names();
  random::set_seed(5);
  Tensor x = constant({{0.f, 0.f}, {0.f, 1.f}, {1.f, 0.f}, {1.f, 1.f}});
  Tensor y = constant({0, 1, 1, 0});
  nn::Sequential model{nn::Dense(8, nn::tanh), nn::Dense(2)};
  optim::Adam adam(0.05);
  float first_loss = -1, loss_value = 0;
  int steps = train_until_perfect(300, [&] {
    GradientTape tape;
    Tensor logits = model(x, /*training=*/true);
    Tensor loss = nn::sparse_softmax_cross_entropy(y, logits);
    std::vector<Variable> vars = model.trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
    loss_value = loss.item<float>();
    if (first_loss < 0) first_loss = loss_value;
    return accuracy(model(x), y);
  });
  EXPECT_GT(steps, 0) << "XOR not learnt in 300 steps; loss " << loss_value;
  EXPECT_LT(loss_value, first_loss);
  EXPECT_EQ(adam.iterations(), steps);
}

TEST(Training, SameSeedsTrainTheSameWeights) {
  auto run = [] {
    nn::reset_layer_names();
    random::set_seed(9);
    Tensor x = random::normal({16, 3}, 0, 1, 1);
    Tensor y = cast(greater(reduce_sum(x, {1}), 0.f), int32);
    nn::Sequential model{nn::Dense(4, nn::relu), nn::Dropout(0.2, 3), nn::Dense(2)};
    optim::SGD sgd(0.1, 0.9);
    for (int i = 0; i < 5; ++i) {
      GradientTape tape;
      Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
      auto vars = model.trainable_variables();
      sgd.apply_gradients(tape.gradient(loss, vars), vars);
    }
    std::vector<float> all;
    for (const Variable& v : model.trainable_variables()) {
      auto w = v.value().to_vector<float>();
      all.insert(all.end(), w.begin(), w.end());
    }
    return all;
  };
  EXPECT_EQ(run(), run());
}

// Two Gaussian blobs, separable by a margin, fed in shuffled mini-batches.
TEST(Training, LinearlySeparableWithMiniBatches) {
  nn::reset_layer_names();
  random::set_seed(21);
  const int64_t n = 256;
  std::vector<float> xs;
  std::vector<int32_t> ys;
  Tensor noise = random::normal({n, 2}, 0, 0.6, 3);
  std::vector<float> nv = noise.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    int32_t label = static_cast<int32_t>(i % 2);
    float cx = label ? 2.f : -2.f, cy = label ? -1.f : 1.f;
    xs.push_back(cx + nv[i * 2]);
    xs.push_back(cy + nv[i * 2 + 1]);
    ys.push_back(label);
  }
  Tensor x = constant(xs, Shape{n, 2});
  Tensor y = constant(ys, Shape{n});
  auto ds = data::Dataset::from_tensors({x, y}).shuffle(n, /*seed=*/4).batch(32).prefetch(2);
  nn::Sequential model{nn::Dense(16, nn::relu), nn::Dense(2)};
  optim::Adam adam(0.02);
  double acc = 0;
  int epochs = 0;
  while (epochs < 20 && acc < 1.0) {
    ++epochs;
    for (const std::vector<Tensor>& batch : ds) {
      GradientTape tape;
      Tensor loss = nn::sparse_softmax_cross_entropy(batch[1], model(batch[0], true));
      auto vars = model.trainable_variables();
      adam.apply_gradients(tape.gradient(loss, vars), vars);
    }
    acc = accuracy(model(x), y);
  }
  EXPECT_EQ(acc, 1.0) << "after " << epochs << " epochs";
  EXPECT_EQ(adam.iterations(), epochs * 8);
}

// Regression: a least-squares fit with plain SGD converges to the known solution.
TEST(Training, LinearRegressionRecoversTheWeights) {
  Tensor x = random::normal({64, 3}, 0, 1, 31, float64);
  Tensor true_w = constant({{1.5}, {-2.0}, {0.5}});
  Tensor y = matmul(x, true_w) + 0.25;
  Variable w(zeros({3, 1}, float64), "w"), b(zeros({1}, float64), "b");
  optim::SGD sgd(0.1);
  for (int i = 0; i < 200; ++i) {
    GradientTape tape;
    Tensor loss = nn::mean_squared_error(y, matmul(x, w) + b);
    sgd.apply_gradients(tape.gradient(loss, std::vector<Variable>{w, b}), {w, b});
  }
  std::vector<double> got = w.value().to_vector<double>();
  EXPECT_NEAR(got[0], 1.5, 1e-6);
  EXPECT_NEAR(got[1], -2.0, 1e-6);
  EXPECT_NEAR(got[2], 0.5, 1e-6);
  EXPECT_NEAR(b.value().item<double>(), 0.25, 1e-6);
}

}  // namespace
}  // namespace weft
