// A weft::function called under a recording GradientTape runs its traced graph and is recorded as
// one op whose gradient runs a traced backward graph (api/function_gradient.h): the same
// gradients as eager, without running the body again.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "api/control_flow.h"
#include "api/function.h"
#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/nn/losses.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"
#include "api/optim/optimizers.h"

namespace weft {
namespace {

void expect_close(const Tensor& a, const Tensor& b, const std::string& what, float tol = 1e-5f) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i)
    ASSERT_NEAR(va[i], vb[i], tol * std::max(1.f, std::abs(va[i]))) << what << " element " << i;
}

struct Mlp {
  Variable w1{random::normal({6, 5}, 0, 0.5, 1), "w1"};
  Variable b1{random::normal({5}, 0, 0.1, 2), "b1"};
  Variable w2{random::normal({5, 3}, 0, 0.5, 3), "w2"};
  Variable b2{random::normal({3}, 0, 0.1, 4), "b2"};
  Tensor operator()(const Tensor& x) const { return matmul(relu(matmul(x, w1) + b1), w2) + b2; }
  std::vector<Variable> variables() const { return {w1, b1, w2, b2}; }
};

const Tensor& batch() {
  static Tensor x = random::normal({4, 6}, 0, 1, 7);
  return x;
}
const Tensor& labels() {
  static Tensor y = constant(std::vector<int32_t>{0, 2, 1, 2});
  return y;
}

TEST(FunctionTape, SameGradientsAsEagerForArgumentsAndVariables) {
  Mlp m;
  int body_runs = 0;
  auto f = function([&](Tensor x) {
    ++body_runs;
    return m(x);
  });
  Tensor x = batch();
  std::vector<Tensor> eager, traced;
  {
    GradientTape tape;
    tape.watch(x);
    Tensor loss = nn::sparse_softmax_cross_entropy(labels(), m(x));
    auto sources = tape.gradient(loss, m.variables());
    eager = sources;
  }
  Tensor eager_dx;
  {
    GradientTape tape;
    tape.watch(x);
    eager_dx = tape.gradient(nn::sparse_softmax_cross_entropy(labels(), m(x)), x);
  }
  Tensor traced_dx;
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor loss = nn::sparse_softmax_cross_entropy(labels(), f(x));
    traced = tape.gradient(loss, m.variables());
    traced_dx = tape.gradient(loss, x);
  }
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t i = 0; i < eager.size(); ++i) expect_close(eager[i], traced[i], "variable " + std::to_string(i));
  expect_close(eager_dx, traced_dx, "dx");
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(body_runs, 1);  // traced once; the tape call ran the graph, not the body
}

TEST(FunctionTape, TracedForwardIsUsedAcrossManyTapeCalls) {
  Mlp m;
  int body_runs = 0;
  auto f = function([&](Tensor x) {
    ++body_runs;
    return m(x);
  });
  for (int i = 0; i < 5; ++i) {
    GradientTape tape;
    Tensor logits = f(batch());
    EXPECT_EQ(tape.num_recorded_ops(), 1u);  // the call, as one op
    Tensor loss = nn::sparse_softmax_cross_entropy(labels(), logits);
    auto g = tape.gradient(loss, m.variables());
    ASSERT_EQ(g.size(), 4u);
  }
  for (int i = 0; i < 3; ++i) (void)f(batch());  // no tape: the usual path
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(body_runs, 1);
}

TEST(FunctionTape, KerasModelCapturedWeightsGetEagerGradients) {
  nn::Sequential model{nn::Dense(8, nn::relu), nn::Dense(3)};
  Tensor x = batch();
  (void)model(x, false);  // builds the weights
  int body_runs = 0;
  auto fwd = function([&](Tensor in) {
    ++body_runs;
    return model(in, true);
  });
  std::vector<Tensor> eager, traced;
  {
    GradientTape tape;
    eager = tape.gradient(nn::sparse_softmax_cross_entropy(labels(), model(x, true)), model.trainable_variables());
  }
  {
    GradientTape tape;
    traced = tape.gradient(nn::sparse_softmax_cross_entropy(labels(), fwd(x)), model.trainable_variables());
  }
  ASSERT_EQ(eager.size(), 4u);
  for (size_t i = 0; i < eager.size(); ++i) expect_close(eager[i], traced[i], "weight " + std::to_string(i));
  EXPECT_EQ(fwd.tracing_count(), 1);
  EXPECT_EQ(body_runs, 1);
}

TEST(FunctionTape, PersistentTapeAnswersTwice) {
  Mlp m;
  auto f = function([&](Tensor x) { return m(x); });
  GradientTape tape(/*persistent=*/true);
  Tensor loss = reduce_sum(square(f(batch())));
  auto first = tape.gradient(loss, m.variables());
  auto second = tape.gradient(loss, m.variables());
  GradientTape eager_tape;
  auto eager = eager_tape.gradient(reduce_sum(square(m(batch()))), m.variables());
  for (size_t i = 0; i < eager.size(); ++i) {
    expect_close(eager[i], first[i], "first " + std::to_string(i));
    expect_close(eager[i], second[i], "second " + std::to_string(i));
  }
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(FunctionTape, ResultsPartlyUnusedAndUnconnectedInputs) {
  Variable w(constant({{1.f, 2.f}, {3.f, 4.f}}), "w");
  auto f = function([&](Tensor a, Tensor b) { return std::make_tuple(matmul(a, w), exp(b), a * 2.f); });
  Tensor a = constant({{1.f, -1.f}}), b = constant({0.5f, 1.5f});
  GradientTape tape(/*persistent=*/true);
  tape.watch(a);
  tape.watch(b);
  auto [y0, y1, y2] = f(a, b);
  Tensor loss = reduce_sum(square(y0));  // y1 and y2 unused
  Tensor da = tape.gradient(loss, a), db = tape.gradient(loss, b), dw = tape.gradient(loss, w);
  GradientTape eager(/*persistent=*/true);
  eager.watch(a);
  eager.watch(b);
  Tensor e_loss = reduce_sum(square(matmul(a, w)));
  (void)exp(b);
  expect_close(eager.gradient(e_loss, a), da, "da");
  expect_close(eager.gradient(e_loss, w), dw, "dw");
  expect_close(zeros({2}), db, "db (unconnected)");
  // A loss of the other results: each result's gradient arrives on its own.
  Tensor loss2 = reduce_sum(y1) + reduce_sum(y2);
  expect_close(exp(b), tape.gradient(loss2, b), "d loss2 / db");
  expect_close(constant({{2.f, 2.f}}), tape.gradient(loss2, a), "d loss2 / da");
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(FunctionTape, IntegerArgumentsGetNoGradient) {
  Mlp m;
  int body_runs = 0;
  auto f = function([&](Tensor x, Tensor y) {
    ++body_runs;
    return nn::sparse_softmax_cross_entropy(y, m(x));
  });
  Tensor x = batch(), y = labels();
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(y);
  Tensor loss = f(x, y);
  Tensor dy = tape.gradient(loss, y);
  EXPECT_EQ(dy.dtype(), DType::Int32);
  for (int32_t v : dy.to_vector<int32_t>()) EXPECT_EQ(v, 0);
  GradientTape eager;
  eager.watch(x);
  expect_close(eager.gradient(nn::sparse_softmax_cross_entropy(y, m(x)), x), tape.gradient(loss, x), "dx");
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(body_runs, 1);
}

TEST(FunctionTape, TrainingLoopWithOutsideTapeMatchesEager) {
  Mlp eager_model, traced_model;
  int body_runs = 0;
  auto fwd = function([&](Tensor x) {
    ++body_runs;
    return traced_model(x);
  });
  optim::Adam opt_e(0.05), opt_t(0.05);
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    Tensor le, lt;
    {
      GradientTape tape;
      le = nn::sparse_softmax_cross_entropy(labels(), eager_model(batch()));
      auto vars = eager_model.variables();
      opt_e.apply_gradients(tape.gradient(le, vars), vars);
    }
    {
      GradientTape tape;
      lt = nn::sparse_softmax_cross_entropy(labels(), fwd(batch()));
      auto vars = traced_model.variables();
      opt_t.apply_gradients(tape.gradient(lt, vars), vars);
    }
    ASSERT_NEAR(le.item<float>(), lt.item<float>(), 1e-4f) << "step " << step;
    if (step == 0) first = lt.item<float>();
    last = lt.item<float>();
  }
  auto ve = eager_model.variables(), vt = traced_model.variables();
  for (size_t i = 0; i < ve.size(); ++i) expect_close(ve[i].value(), vt[i].value(), "variable", 1e-4f);
  EXPECT_LT(last, 0.5f * first);  // it learns the four labels
  EXPECT_EQ(body_runs, 1);
  EXPECT_EQ(fwd.tracing_count(), 1);
}

TEST(FunctionTape, BodyThatWritesAVariableRunsEagerly) {
  Variable w(constant({2.f}), "w");
  Variable counter(constant({0.f}), "counter", /*trainable=*/false);
  int body_runs = 0;
  auto f = function([&](Tensor x) {
    ++body_runs;
    counter.assign_add(constant({1.f}));
    return x * w;
  });
  Tensor x = constant({3.f});
  (void)f(x);  // traced
  EXPECT_EQ(body_runs, 1);
  GradientTape tape;
  Tensor y = f(x);
  expect_close(constant({3.f}), tape.gradient(y, w), "dw");
  EXPECT_EQ(body_runs, 2);  // eager under the tape
  EXPECT_EQ(counter.value().to_vector<float>()[0], 2.f);
}

TEST(FunctionTape, NestedTapesGiveSecondDerivatives) {
  auto cube = function([](Tensor x) { return x * x * x; });
  Tensor x = constant({2.f, -1.f});
  GradientTape outer;
  outer.watch(x);
  Tensor dx;
  {
    GradientTape inner;
    inner.watch(x);
    dx = inner.gradient(reduce_sum(cube(x)), x);  // 3x^2
  }
  expect_close(constant({12.f, 3.f}), dx, "first derivative");
  expect_close(constant({12.f, -6.f}), outer.gradient(reduce_sum(dx), x), "second derivative");  // 6x
}

TEST(FunctionTape, TapeOpenedAfterTheCallSeesTheBackwardAsInEager) {
  auto cube = function([](Tensor x) { return x * x * x; });
  Tensor x = constant({2.f, -1.f});
  auto run = [&](bool traced) {
    GradientTape first;
    first.watch(x);
    Tensor y = reduce_sum(traced ? cube(x) : x * x * x);
    GradientTape second;
    second.watch(x);
    Tensor g = first.gradient(y, x);
    return std::make_pair(g, second.gradient(reduce_sum(g), x));
  };
  auto [ge, he] = run(false);
  auto [gt, ht] = run(true);
  expect_close(ge, gt, "gradient");
  expect_close(he, ht, "what the later tape saw");
  EXPECT_EQ(cube.tracing_count(), 1);
}

TEST(FunctionTape, ControlFlowInsideTheFunction) {
  Variable w(constant({1.5f, -0.5f}), "w");
  int body_runs = 0;
  auto body = [&](const Tensor& x, const Tensor& flag) {
    Tensor h = cond(flag, [&] { return x * w; }, [&] { return x + w; });
    std::vector<Tensor> r = while_loop([](const std::vector<Tensor>& v) { return v[1] < 3; },
                                       [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
                                         return {v[0] * w, v[1] + 1};
                                       },
                                       {h, constant(int32_t{0})});
    return r[0];
  };
  auto f = function([&](Tensor x, Tensor flag) {
    ++body_runs;
    return body(x, flag);
  });
  Tensor x = constant({0.5f, 2.f});
  for (bool taken : {true, false}) {
    Tensor flag = constant(taken);
    GradientTape eager(/*persistent=*/true), traced(/*persistent=*/true);
    eager.watch(x);
    traced.watch(x);
    traced.stop_recording();
    Tensor ye = reduce_sum(square(body(x, flag)));
    eager.stop_recording();
    traced.resume();
    Tensor yt = reduce_sum(square(f(x, flag)));
    expect_close(eager.gradient(ye, x), traced.gradient(yt, x), "dx");
    expect_close(eager.gradient(ye, w), traced.gradient(yt, w), "dw");
  }
  EXPECT_EQ(body_runs, 1);
}

TEST(FunctionTape, RelaxedShapesServeEveryBatchSize) {
  Mlp m;
  int body_runs = 0;
  auto f = function(
      [&](Tensor x) {
        ++body_runs;
        return m(x);
      },
      {.relax_shapes = true});
  for (int64_t rows : {2, 3, 5, 7}) {
    Tensor x = random::normal({rows, 6}, 0, 1, rows);
    GradientTape eager, traced;
    traced.stop_recording();
    Tensor le = reduce_sum(square(m(x)));
    eager.stop_recording();
    traced.resume();
    Tensor lt = reduce_sum(square(f(x)));
    auto ge = eager.gradient(le, m.variables()), gt = traced.gradient(lt, m.variables());
    for (size_t i = 0; i < ge.size(); ++i) expect_close(ge[i], gt[i], "rows " + std::to_string(rows));
  }
  EXPECT_LE(f.tracing_count(), 2);
  EXPECT_EQ(body_runs, f.tracing_count());
}

TEST(FunctionTape, FunctionWithoutFloatingInputsIsNotRecorded) {
  int body_runs = 0;
  auto f = function([&](Tensor n) {
    ++body_runs;
    return cast(n, float32) * 2.f;
  });
  GradientTape tape;
  Tensor y = f(constant(std::vector<int32_t>{1, 2}));
  expect_close(constant({2.f, 4.f}), y, "y");
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
  EXPECT_EQ(body_runs, 1);
}

}  // namespace
}  // namespace weft
