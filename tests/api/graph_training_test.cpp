// TF1-style training: a model, its loss, its gradients and the optimizer's train op built once in
// a Graph, then run step after step by a Session, matching the same training done eagerly.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/nn/losses.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"
#include "api/optim/optimizers.h"
#include "api/session.h"
#include "runtime/graph.h"

namespace weft {
namespace {

using MakeOptimizer = std::function<optim::Optimizer()>;

// A small MLP whose weights are set to fixed values (so the graph and the eager copy start alike).
struct Mlp {
  nn::Sequential model{nn::Dense(8, nn::relu), nn::Dense(3)};
  void set_weights() const {
    int64_t seed = 100;
    for (Variable v : model.trainable_variables()) v.restore(random::normal(v.shape(), 0, 0.5, seed++));
  }
};

Tensor inputs() { return random::normal({16, 4}, 0, 1, 1); }
Tensor labels() { return constant({0, 1, 2, 1, 0, 2, 2, 1, 0, 0, 1, 2, 1, 1, 0, 2}); }

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;
};

std::vector<std::vector<float>> weights_of(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Variable& v : m.trainable_variables()) out.push_back(v.value().to_vector<float>());
  return out;
}

Trained train_eagerly(const MakeOptimizer& make_opt, int steps) {
  Mlp mlp;
  mlp.model(inputs());  // builds the variables
  mlp.set_weights();
  optim::Optimizer opt = make_opt();
  Trained t;
  for (int i = 0; i < steps; ++i) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(labels(), mlp.model(inputs(), true));
    auto vars = mlp.model.trainable_variables();
    Operation done = opt.apply_gradients(tape.gradient(loss, vars), vars);
    EXPECT_FALSE(done.defined());  // eagerly, the updates have run already
    t.losses.push_back(loss.item<float>());
  }
  t.weights = weights_of(mlp.model);
  return t;
}

Trained train_in_graph(const MakeOptimizer& make_opt, int steps) {
  Mlp mlp;
  optim::Optimizer opt = make_opt();
  Graph g;
  Tensor x, y, loss;
  Operation train;
  {
    GraphScope scope(g);
    x = placeholder(float32, {-1, 4}, "x");
    y = placeholder(int32, {-1}, "y");
    GradientTape tape;
    loss = nn::sparse_softmax_cross_entropy(y, mlp.model(x, true));
    auto vars = mlp.model.trainable_variables();
    train = opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  mlp.set_weights();  // before the first run: the Session keeps restored values
  EXPECT_TRUE(train.defined());
  EXPECT_EQ(train.type(), "NoOp");
  Session sess(g);
  Tensor xb = inputs(), yb = labels();
  Trained t;
  for (int i = 0; i < steps; ++i) t.losses.push_back(sess.run({{x, xb}, {y, yb}}, {loss}, {train})[0].item<float>());
  t.weights = weights_of(mlp.model);
  return t;
}

void expect_graph_matches_eager(const MakeOptimizer& make_opt) {
  const int steps = 12;
  Trained graph = train_in_graph(make_opt, steps);
  Trained eager = train_eagerly(make_opt, steps);
  ASSERT_EQ(graph.losses.size(), eager.losses.size());
  for (int i = 0; i < steps; ++i) EXPECT_NEAR(graph.losses[i], eager.losses[i], 1e-5) << "step " << i;
  EXPECT_LT(graph.losses.back(), graph.losses.front() - 0.05f);
  ASSERT_EQ(graph.weights.size(), eager.weights.size());
  for (size_t v = 0; v < graph.weights.size(); ++v)
    for (size_t i = 0; i < graph.weights[v].size(); ++i)
      EXPECT_NEAR(graph.weights[v][i], eager.weights[v][i], 1e-5) << "variable " << v << " element " << i;
}

TEST(GraphTraining, SgdInAGraphMatchesEagerStepByStep) {
  expect_graph_matches_eager([] { return optim::SGD(0.3); });
}

TEST(GraphTraining, MomentumInAGraphMatchesEagerStepByStep) {
  expect_graph_matches_eager([] { return optim::SGD(0.1, 0.9); });
  expect_graph_matches_eager([] { return optim::SGD(0.1, 0.9, /*nesterov=*/true); });
}

TEST(GraphTraining, AdamInAGraphMatchesEagerStepByStep) {
  expect_graph_matches_eager([] { return optim::Adam(0.05); });
}

TEST(GraphTraining, AdamWWithAScheduleInAGraphMatchesEagerStepByStep) {
  expect_graph_matches_eager([] {
    optim::AdamW opt(optim::CosineDecay(0.08, 6, 0.1, 3), 0.2);
    opt.exclude_from_weight_decay({"bias"});
    return opt;
  });
}

// Logistic regression written out by hand: variables, matmul, loss, tape, train op.
TEST(GraphTraining, LogisticRegressionLossDecreases) {
  Variable w(zeros({4, 3}), "w"), b(zeros({3}), "b");
  optim::SGD opt(0.5);
  Graph g;
  Tensor loss;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {-1, 4}, "x");
    Tensor y = placeholder(int32, {-1}, "y");
    GradientTape tape;
    loss = identity(nn::sparse_softmax_cross_entropy(y, matmul(x, w) + b), "loss");
    opt.apply_gradients(tape.gradient(loss, std::vector<Variable>{w, b}), {w, b});
  }
  Session sess(g);
  std::vector<float> losses;
  for (int i = 0; i < 5; ++i)
    losses.push_back(sess.run({{"x", inputs()}, {"y", labels()}}, {"loss"}, {"train"})[0].item<float>());
  for (int i = 1; i < 5; ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
  EXPECT_EQ(opt.iterations(), 5);
}

// As in TensorFlow 1: fetching the loss never trains; each run of the train op trains once.
TEST(GraphTraining, UpdatesRunOnlyWhenTheTrainOpIsATargetAndOncePerRun) {
  Variable w(constant({{1.f}, {2.f}}), "w");
  optim::SGD opt(0.1);
  Graph g;
  Tensor x, loss, after;
  Operation train;
  {
    GraphScope scope(g);
    x = placeholder(float32, {-1, 2}, "x");
    GradientTape tape;
    loss = reduce_sum(matmul(x, w));
    train = opt.apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
    after = reduce_sum(matmul(x, w));  // built after the train op: reads the variable after the update
  }
  Session sess(g);
  Tensor xb = constant({{1.f, 1.f}});
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(sess.run({{x, xb}}, {loss})[0].item<float>(), 3.f);
    EXPECT_FLOAT_EQ(sess.run({{x, xb}}, {after})[0].item<float>(), 3.f);
  }
  EXPECT_EQ(opt.iterations(), 0);
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1.f, 2.f}));

  // d loss / d w = [1, 1]: each run subtracts 0.1 once. A run that also fetches the later read
  // sees that run's update.
  auto out = sess.run({{x, xb}}, {loss, after}, {train});
  EXPECT_FLOAT_EQ(out[0].item<float>(), 3.f);
  EXPECT_FLOAT_EQ(out[1].item<float>(), 2.8f);
  EXPECT_EQ(opt.iterations(), 1);
  sess.run({{x, xb}}, {}, {train});
  EXPECT_EQ(opt.iterations(), 2);
  std::vector<float> v = w.value().to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 0.8f);
  EXPECT_FLOAT_EQ(v[1], 1.8f);
}

TEST(GraphTraining, TrainOpRunsByNameAndFollowsTheNameScope) {
  Variable w(constant(2.f), "w");
  optim::SGD opt(0.25);
  Graph g;
  {
    GraphScope scope(g);
    GradientTape tape;
    Tensor loss = identity(square(w.value()), "loss");  // d/dw = 2w
    NameScope ns("optimizer");
    Operation train = opt.apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
    EXPECT_EQ(train.name(), "optimizer/train");
  }
  Session sess(g);
  EXPECT_FLOAT_EQ(sess.run({}, {"loss"}, {"optimizer/train"})[0].item<float>(), 4.f);
  EXPECT_FLOAT_EQ(w.value().item<float>(), 1.f);  // 2 - 0.25 * 4
  sess.run({}, {}, {g.operation("optimizer/train")});
  EXPECT_FLOAT_EQ(w.value().item<float>(), 0.5f);
}

TEST(GraphTraining, SlotVariablesAreInitialisedOnTheFirstRun) {
  Graph g;
  Variable w;
  optim::Adam adam(0.1);
  optim::SGD momentum(0.1, 0.5);
  Operation train_adam, train_momentum;
  {
    GraphScope scope(g);
    w = Variable(constant({1.f, -1.f}), "w");
    GradientTape tape;
    Tensor loss = reduce_sum(square(w.value()));
    auto grads = tape.gradient(loss, std::vector<Variable>{w});
    train_adam = adam.apply_gradients(grads, {w});
    train_momentum = momentum.apply_gradients(grads, {w});
  }
  Session sess(g);
  sess.run({}, {}, {train_adam});
  std::vector<float> m = adam.slot(w, "m").value().to_vector<float>();
  EXPECT_NEAR(m[0], 0.2f, 1e-6);  // (1 - 0.9) * 2w
  EXPECT_NEAR(m[1], -0.2f, 1e-6);
  EXPECT_NEAR(adam.slot(w, "v").value().to_vector<float>()[0], 0.004f, 1e-6);  // (1 - 0.999) * 4
  EXPECT_EQ(adam.iterations(), 1);
  EXPECT_EQ(momentum.iterations(), 0);
  sess.run({}, {}, {train_momentum});
  EXPECT_EQ(momentum.iterations(), 1);
  EXPECT_TRUE(momentum.slot(w, "momentum").value().defined());
}

// Slots of a train op built after the Session's first run are initialised by the next run.
TEST(GraphTraining, ATrainOpAddedAfterARunGetsItsSlotsInitialised) {
  Graph g;
  Variable w;
  Tensor loss;
  {
    GraphScope scope(g);
    w = Variable(constant({3.f}), "w");
    loss = reduce_sum(square(w.value()));
  }
  Session sess(g);
  EXPECT_FLOAT_EQ(sess.run({loss})[0].item<float>(), 9.f);
  optim::SGD opt(0.1, 0.9);
  Operation train;
  {
    GraphScope scope(g);
    GradientTape tape;
    Tensor l = reduce_sum(square(w.value()));
    train = opt.apply_gradients(tape.gradient(l, std::vector<Variable>{w}), {w});
  }
  sess.run({}, {}, {train});
  EXPECT_FLOAT_EQ(w.value().item<float>(), 3.f - 0.1f * 6.f);
}

TEST(GraphTraining, AssignmentsAreTargetsAndTheirResultsAreTheNewValues) {
  Graph g;
  Variable v(constant(10.f), "v");
  Tensor x, added, subtracted, set, read;
  {
    GraphScope scope(g);
    x = placeholder(float32, {}, "x");
    added = v.assign_add(x);
    subtracted = v.assign_sub(x);
    set = v.assign(x * 2.f);
    read = v.value();
  }
  Session sess(g);
  EXPECT_FLOAT_EQ(sess.run({read})[0].item<float>(), 10.f);  // a read alone runs no assignment
  EXPECT_FLOAT_EQ(sess.run({{x, constant(1.f)}}, {added})[0].item<float>(), 11.f);
  sess.run({{x, constant(2.f)}}, {}, {added});  // the Tensor as a target: its operation runs
  EXPECT_FLOAT_EQ(v.value().item<float>(), 13.f);
  sess.run({{x, constant(3.f)}}, {}, {subtracted});
  EXPECT_FLOAT_EQ(v.value().item<float>(), 10.f);
  EXPECT_FLOAT_EQ(sess.run({{x, constant(4.f)}}, {set})[0].item<float>(), 8.f);
  EXPECT_FLOAT_EQ(sess.run({read})[0].item<float>(), 8.f);

  // Eagerly the new value comes back too.
  Variable e(constant(1.f), "e");
  EXPECT_FLOAT_EQ(e.assign_add(constant(2.f)).item<float>(), 3.f);
  EXPECT_FLOAT_EQ(e.assign_sub(constant(1.f)).item<float>(), 2.f);
  EXPECT_FLOAT_EQ(e.assign(constant(7.f)).item<float>(), 7.f);
}

TEST(GraphTraining, BadTargetsAreErrors) {
  Variable w(constant(1.f), "w");
  optim::SGD opt(0.1);
  Operation eager = opt.apply_gradients({constant(1.f)}, {w});
  EXPECT_FALSE(eager.defined());
  EXPECT_THROW(eager.name(), FailedPrecondition);
  Graph g, other;
  Operation train;
  {
    GraphScope scope(other);
    GradientTape tape;
    Tensor loss = square(w.value());
    train = opt.apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
  }
  {
    GraphScope scope(g);
    identity(w.value(), "read");
  }
  Session sess(g);
  EXPECT_THROW(sess.run({}, {"read"}, {eager}), InvalidArgument);
  try {
    sess.run({}, {"read"}, {train});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("another graph"), std::string::npos) << e.what();
  }
}

// --- Source lines: the nodes the API makes for the user carry the user's file:line. ---

const char* const kThisFile = "graph_training_test.cpp";

// Every node of `g` from id `first` on was created at this file's `line`.
void expect_created_at(const Graph& g, int32_t first, int line, const std::string& what) {
  int checked = 0;
  for (const Operation& op : g.operations()) {
    if (op.id() < first) continue;
    ++checked;
    const SourceLoc& loc = op.source_location();
    EXPECT_NE(loc.file.find(kThisFile), std::string::npos)
        << what << ": node " << op.name() << " (" << op.type() << ") at " << loc.to_string();
    EXPECT_EQ(loc.line, static_cast<uint32_t>(line))
        << what << ": node " << op.name() << " (" << op.type() << ") at " << loc.to_string();
  }
  EXPECT_GT(checked, 0) << what << " made no node";
}

TEST(GraphTraining, NodesMadeByTheApiCarryTheCallersLine) {
  Graph g;
  GraphScope scope(g);
  int32_t first = g.ir().id_bound();
  Tensor x = placeholder(float32, {-1, 4}, "x");
  Tensor y = placeholder(int32, {-1}, "y");
  Tensor target = placeholder(float32, {-1, 3}, "target");

  first = g.ir().id_bound();
  Variable v(random::normal({3}, 0, 1, 5), "v"); const int line_var = __LINE__;
  expect_created_at(g, first, line_var, "Variable");  // its initialiser

  first = g.ir().id_bound();
  Tensor r = v.value(); const int line_read = __LINE__;
  expect_created_at(g, first, line_read, "value");
  first = g.ir().id_bound();
  v.assign(r * 2.f); const int line_assign = __LINE__;
  // r * 2.f's Mul is on that line too.
  expect_created_at(g, first, line_assign, "assign");
  first = g.ir().id_bound();
  v.assign_add(r); const int line_add = __LINE__;
  expect_created_at(g, first, line_add, "assign_add");
  first = g.ir().id_bound();
  v.assign_sub(r); const int line_sub = __LINE__;
  expect_created_at(g, first, line_sub, "assign_sub");

  nn::Sequential model{nn::Dense(5, nn::relu), nn::Dropout(0.5, 3), nn::Dense(3, nn::softmax)};
  first = g.ir().id_bound();
  Tensor probs = model(x, /*training=*/true); const int line_model = __LINE__;
  expect_created_at(g, first, line_model, "Sequential of Dense and Dropout");
  nn::Dense tanh_layer(3, nn::tanh), sigmoid_layer(3, nn::sigmoid);
  first = g.ir().id_bound();
  Tensor h = sigmoid_layer(tanh_layer(x)); const int line_dense = __LINE__;
  expect_created_at(g, first, line_dense, "Dense");

  first = g.ir().id_bound();
  Tensor mse = nn::mean_squared_error(target, probs); const int line_mse = __LINE__;
  expect_created_at(g, first, line_mse, "mean_squared_error");
  first = g.ir().id_bound();
  Tensor xent = nn::sparse_softmax_cross_entropy(y, h); const int line_xent = __LINE__;
  expect_created_at(g, first, line_xent, "sparse_softmax_cross_entropy");

  auto vars = model.trainable_variables();
  std::vector<Tensor> grads;
  for (const Variable& var : vars) grads.push_back(ones(var.shape()));
  for (const MakeOptimizer& make : std::vector<MakeOptimizer>{[] { return optim::SGD(0.1); },
                                                               [] { return optim::SGD(0.1, 0.9); },
                                                               [] { return optim::Adam(0.1); }}) {
    optim::Optimizer opt = make();
    first = g.ir().id_bound();
    Operation train = opt.apply_gradients(grads, vars); const int line_train = __LINE__;
    expect_created_at(g, first, line_train, "apply_gradients");  // updates, slots' initialisers, the NoOp
    EXPECT_EQ(train.source_location().line, static_cast<uint32_t>(line_train));
  }
}

TEST(GraphTraining, GradientNodesCarryTheLineOfTheGradientCall) {
  Graph g;
  GraphScope scope(g);
  Tensor x = placeholder(float32, {-1, 4}, "x");
  Tensor y = placeholder(int32, {-1}, "y");
  nn::Sequential model{nn::Dense(5, nn::relu), nn::Dense(3)};
  GradientTape tape;
  Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, /*training=*/true));
  const int32_t first = g.ir().id_bound();
  auto grads = tape.gradient(loss, model.trainable_variables()); const int line_grad = __LINE__;
  ASSERT_EQ(grads.size(), 4u);
  expect_created_at(g, first, line_grad, "tape.gradient");  // not gradient_tape.cpp, linalg.cpp, ...
  // Outside a gradient call, nodes take their own lines again.
  const int32_t after = g.ir().id_bound();
  Tensor z = exp(x); const int line_relu = __LINE__;
  expect_created_at(g, after, line_relu, "exp after the gradient");
}

// `message` names this file at `line`.
void expect_names_line(const std::string& message, int line) {
  EXPECT_NE(message.find(std::string(kThisFile) + ":" + std::to_string(line)), std::string::npos) << message;
}

TEST(GraphTraining, ErrorsInAGraphNameTheCallersLine) {
  Graph g;
  GraphScope scope(g);
  nn::Dense dense(2);
  dense(placeholder(float32, {-1, 4}, "x"));
  Tensor wide = placeholder(float32, {-1, 5}, "wide");
  int line = 0;
  try {
    line = __LINE__; dense(wide);
    FAIL();
  } catch (const InvalidArgument& e) {
    expect_names_line(e.what(), line);
  }
  Variable v(zeros({3}), "v");
  try {
    line = __LINE__; v.assign(zeros({4}));
    FAIL();
  } catch (const InvalidArgument& e) {
    expect_names_line(e.what(), line);
  }
  try {
    line = __LINE__; nn::mean_squared_error(placeholder(float32, {-1, 3}, "t"), placeholder(float32, {-1, 2}, "p"));
    FAIL();
  } catch (const InvalidArgument& e) {
    expect_names_line(e.what(), line);
  }
}

}  // namespace
}  // namespace weft
