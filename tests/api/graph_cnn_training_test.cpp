// TF1-style training of a convolutional network: conv with relu, batch norm, pooling, a depthwise
// convolution, a dense head, built once in a Graph and run step by step by a Session, matching
// the same training
// done eagerly (losses, trained weights and batch norm's moving statistics).
#include <gtest/gtest.h>

#include <vector>

#include "weft/weft.h"

namespace weft {
namespace {

nn::Sequential small_cnn() {
  return nn::Sequential{nn::Conv2D(4, {3, 3}, {.padding = "same", .activation = nn::relu}),
                        nn::BatchNormalization(),
                        nn::MaxPool2D({2, 2}),
                        nn::DepthwiseConv2D({3, 3}, {.padding = "same", .depth_multiplier = 2}),
                        nn::Conv2D(6, {3, 3}, {.strides = {2, 2}, .padding = "same", .use_bias = false}),
                        nn::BatchNormalization(),
                        nn::ReLU(),
                        nn::AvgPool2D({2, 2}, {}, "same"),
                        nn::Flatten(),
                        nn::Dense(3)};
}

Tensor images() { return random::normal({6, 12, 12, 2}, 0, 1, 31); }
Tensor labels() { return constant({0, 1, 2, 1, 0, 2}); }

// Every variable of the model, trainable or not, in the model's order.
std::vector<std::vector<float>> values_of(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Variable& v : m.variables()) out.push_back(v.value().to_vector<float>());
  return out;
}

// Fixed starting values for every variable, so the graph and the eager copy start alike.
void set_variables(const nn::Module& m) {
  int64_t seed = 500;
  for (Variable v : m.trainable_variables()) v.restore(random::normal(v.shape(), 0, 0.4, seed++));
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> variables;
};

Trained train_eagerly(int steps) {
  nn::Sequential model = small_cnn();
  (void)model(images(), false);  // builds the variables
  set_variables(model);
  optim::SGD opt(0.1, 0.9);
  Trained t;
  for (int i = 0; i < steps; ++i) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(labels(), model(images(), true));
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    t.losses.push_back(loss.item<float>());
  }
  t.variables = values_of(model);
  return t;
}

// The model's training step built once in a Graph: its placeholders, its loss and its train op.
struct GraphStep {
  Graph g;
  Tensor x, y, loss;
  Operation train;
  GraphStep(nn::Sequential& model, optim::SGD& opt) {
    GraphScope scope(g);
    x = placeholder(float32, {-1, 12, 12, 2}, "x");
    y = placeholder(int32, {-1}, "y");
    GradientTape tape;
    loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    auto vars = model.trainable_variables();
    train = opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  float run(Session& sess, const Tensor& xb, const Tensor& yb) const {
    return sess.run({{x, xb}, {y, yb}}, {loss}, {train})[0].item<float>();
  }
};

Trained train_in_graph(int steps) {
  nn::Sequential model = small_cnn();
  optim::SGD opt(0.1, 0.9);
  const GraphStep step(model, opt);
  set_variables(model);  // before the first run: the Session keeps restored values
  Session sess(step.g);
  Trained t;
  const Tensor xb = images(), yb = labels();
  for (int i = 0; i < steps; ++i) t.losses.push_back(step.run(sess, xb, yb));
  t.variables = values_of(model);
  return t;
}

TEST(GraphCnnTraining, SessionMatchesEagerStepByStep) {
  const int steps = 6;
  const Trained graph = train_in_graph(steps);
  const Trained eager = train_eagerly(steps);
  ASSERT_EQ(graph.losses.size(), eager.losses.size());
  for (int i = 0; i < steps; ++i) EXPECT_NEAR(graph.losses[i], eager.losses[i], 1e-4) << "step " << i;
  EXPECT_LT(graph.losses.back(), graph.losses.front() - 0.05f) << "the network did not learn";
  ASSERT_EQ(graph.variables.size(), eager.variables.size());
  // Two convolutions (kernel, bias; kernel), the depthwise one (kernel, bias), two batch norms
  // (gamma, beta, moving mean and variance) and the dense layer: 2 + 1 + 2 + 8 + 2.
  EXPECT_EQ(graph.variables.size(), 15u);
  for (size_t v = 0; v < graph.variables.size(); ++v) {
    ASSERT_EQ(graph.variables[v].size(), eager.variables[v].size());
    for (size_t i = 0; i < graph.variables[v].size(); ++i)
      EXPECT_NEAR(graph.variables[v][i], eager.variables[v][i], 1e-4) << "variable " << v << " element " << i;
  }
}

// The moving statistics move in a Session's training steps (they start at 0 and 1).
TEST(GraphCnnTraining, MovingStatisticsUpdateInASession) {
  nn::Sequential model = small_cnn();
  optim::SGD opt(0.05);
  const GraphStep step(model, opt);
  Session sess(step.g);
  step.run(sess, images(), labels());
  int moved = 0;
  for (const Variable& v : model.variables()) {
    if (v.trainable()) continue;
    const std::vector<float> values = v.value().to_vector<float>();
    for (float e : values) moved += e != 0.f && e != 1.f;
  }
  EXPECT_GT(moved, 0) << "no moving statistic changed";
}

}  // namespace
}  // namespace weft
