// GradientTape semantics: sources of every kind, persistence, nesting, what stops gradients, what
// the tape records, and that it lets go of what it held.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/allocator.h"
#include "weft/weft.h"

namespace weft {
namespace {

std::vector<double> d(const Tensor& t) { return t.to_vector<double>(); }

TEST(GradientTapeSemantics, ListOfVariables) {
  // loss = sum(x @ w + b): dloss/dw[i][j] = sum over rows of x[:, i]; dloss/db = rows.
  Tensor x = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Variable w(constant({{1.0, -1.0}, {0.5, 2.0}, {0.0, 1.0}}), "w");
  Variable b(constant({0.1, 0.2}), "b");
  GradientTape tape;
  Tensor loss = reduce_sum(matmul(x, w) + b);
  auto g = tape.gradient(loss, std::vector<Variable>{w, b});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(d(g[0]), (std::vector<double>{5, 5, 7, 7, 9, 9}));
  EXPECT_EQ(d(g[1]), (std::vector<double>{2, 2}));
}

TEST(GradientTapeSemantics, ListOfTensorsAndIntermediates) {
  Tensor x = constant({1.0, 2.0});
  Tensor y = constant({3.0, -1.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(y);
  Tensor p = x * y;                      // an intermediate: a source without watch()
  Tensor loss = reduce_sum(p * x + y);   // = sum(x^2 y + y)
  auto g = tape.gradient(loss, std::vector<Tensor>{x, y, p});
  EXPECT_EQ(d(g[0]), (std::vector<double>{6, -4}));  // 2xy
  EXPECT_EQ(d(g[1]), (std::vector<double>{2, 5}));   // x^2 + 1
  EXPECT_EQ(d(g[2]), (std::vector<double>{1, 2}));   // x
  EXPECT_EQ(d(tape.gradient(loss, loss)), (std::vector<double>{1}));
  // A source used several times accumulates.
  Tensor z = x * x + x + x;
  EXPECT_EQ(d(tape.gradient(z, x)), (std::vector<double>{4, 6}));
}

TEST(GradientTapeSemantics, VariableReadAcrossAnAssignment) {
  Variable w(constant(2.0), "w");
  GradientTape tape;
  Tensor y = w * 3.0;
  w.assign_add(constant(1.0));
  Tensor z = y + w * 5.0;  // reads the new value; both reads are the variable
  EXPECT_DOUBLE_EQ(tape.gradient(z, w).item<double>(), 8.0);
  EXPECT_DOUBLE_EQ(z.item<double>(), 21.0);
}

TEST(GradientTapeSemantics, PersistentTapeWithVariables) {
  Variable w(constant({1.0, 2.0}), "w");
  GradientTape tape(/*persistent=*/true);
  Tensor sq = reduce_sum(w * w);
  Tensor cube = reduce_sum(w * w * w);
  EXPECT_EQ(d(tape.gradient(sq, w)), (std::vector<double>{2, 4}));
  EXPECT_EQ(d(tape.gradient(cube, w)), (std::vector<double>{3, 12}));
  EXPECT_EQ(d(tape.gradient(sq, std::vector<Variable>{w, w})[1]), (std::vector<double>{2, 4}));
  // Still recording after answering.
  Tensor later = reduce_sum(w * 4.0);
  EXPECT_EQ(d(tape.gradient(later, w)), (std::vector<double>{4, 4}));
}

TEST(GradientTapeSemantics, NonPersistentSecondCallFails) {
  Variable w(constant(1.0), "w");
  GradientTape tape;
  Tensor y = w * w;
  tape.gradient(y, std::vector<Variable>{w});
  EXPECT_THROW(tape.gradient(y, std::vector<Variable>{w}), FailedPrecondition);
  EXPECT_THROW(tape.gradient(y, w), FailedPrecondition);
  EXPECT_THROW(tape.gradient(y, std::vector<Tensor>{y}), FailedPrecondition);
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
}

TEST(GradientTapeSemantics, SecondDerivativeOfTanh) {
  std::vector<double> xs = {-1.5, -0.2, 0.0, 0.7, 2.0};
  Tensor x = constant(xs);
  GradientTape outer;
  outer.watch(x);
  Tensor dy;
  {
    GradientTape inner;
    inner.watch(x);
    dy = inner.gradient(tanh(x), x);
  }
  Tensor d2 = outer.gradient(dy, x);
  for (size_t i = 0; i < xs.size(); ++i) {
    double t = std::tanh(xs[i]);
    EXPECT_NEAR(d(dy)[i], 1 - t * t, 1e-14);
    EXPECT_NEAR(d(d2)[i], -2 * t * (1 - t * t), 1e-14) << xs[i];
  }
}

TEST(GradientTapeSemantics, SecondDerivativeOfXTimesExpAndSigmoid) {
  std::vector<double> xs = {-1.0, 0.5, 1.25};
  Tensor x = constant(xs);
  GradientTape outer(/*persistent=*/true);
  outer.watch(x);
  Tensor d1, s1;
  {
    GradientTape inner(/*persistent=*/true);
    inner.watch(x);
    d1 = inner.gradient(x * exp(x), x);       // e^x (1 + x)
    s1 = inner.gradient(sigmoid(x), x);       // s (1 - s)
  }
  Tensor d2 = outer.gradient(d1, x);          // e^x (2 + x)
  Tensor s2 = outer.gradient(s1, x);          // s (1 - s) (1 - 2s)
  for (size_t i = 0; i < xs.size(); ++i) {
    double e = std::exp(xs[i]), s = 1 / (1 + std::exp(-xs[i]));
    EXPECT_NEAR(d(d1)[i], e * (1 + xs[i]), 1e-12);
    EXPECT_NEAR(d(d2)[i], e * (2 + xs[i]), 1e-12);
    EXPECT_NEAR(d(s2)[i], s * (1 - s) * (1 - 2 * s), 1e-14);
  }
}

TEST(GradientTapeSemantics, ThirdOrderAndVariables) {
  Variable w(constant(1.5), "w");
  GradientTape t1;
  Tensor g2;
  {
    GradientTape t2;
    Tensor g1;
    {
      GradientTape t3;
      Tensor y = w * w * w * w;  // w^4
      g1 = t3.gradient(y, w);    // 4 w^3
    }
    g2 = t2.gradient(g1, w);     // 12 w^2
  }
  Tensor g3 = t1.gradient(g2, w);  // 24 w
  EXPECT_DOUBLE_EQ(g2.item<double>(), 12 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(g3.item<double>(), 24 * 1.5);
}

TEST(GradientTapeSemantics, StopGradientInsideAComposition) {
  Tensor x = constant({2.0, 3.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * stop_gradient(x * x) + stop_gradient(exp(x));
  EXPECT_EQ(d(tape.gradient(y, x)), (std::vector<double>{4, 9}));
}

TEST(GradientTapeSemantics, UnconnectedSourcesGetZerosOfTheirShapeAndDtype) {
  Tensor x = constant({1.f, 2.f});
  Tensor unwatched = constant({{1.f, 2.f, 3.f}});
  Variable v(constant({{1.0, 2.0}}), "v");  // never read under the tape
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = reduce_sum(x * x);
  Tensor gu = tape.gradient(y, unwatched);
  EXPECT_EQ(gu.shape(), unwatched.shape());
  EXPECT_EQ(gu.dtype(), float32);
  EXPECT_EQ(gu.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  Tensor gv = tape.gradient(y, v);
  EXPECT_EQ(gv.shape(), (Shape{1, 2}));
  EXPECT_EQ(gv.dtype(), float64);
  EXPECT_EQ(d(gv), (std::vector<double>{0, 0}));
  // A target that does not depend on the source at all.
  Tensor c = constant(5.f);
  EXPECT_EQ(tape.gradient(c, x).to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(GradientTapeSemantics, IntegerTensorsGetNoGradient) {
  Tensor i = constant({1, 2, 3});
  Tensor f = constant({0.5, 0.5, 0.5});
  GradientTape tape(/*persistent=*/true);
  tape.watch(i);
  tape.watch(f);
  Tensor y = reduce_sum(cast(i, float64) * f * 2.0);
  auto g = tape.gradient(y, std::vector<Tensor>{i, f});
  EXPECT_EQ(g[0].dtype(), int32);
  EXPECT_EQ(g[0].to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(d(g[1]), (std::vector<double>{2, 4, 6}));
  // An integer target seeds nothing.
  Tensor iy = i * 3;
  EXPECT_EQ(tape.gradient(iy, i).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
  Tensor fy = cast(iy, float64) + f;
  EXPECT_EQ(d(tape.gradient(fy, f)), (std::vector<double>{1, 1, 1}));
}

TEST(GradientTapeSemantics, StopRecordingAndResume) {
  Tensor x = constant(3.0);
  Variable w(constant(2.0), "w");
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor a = x * x;
  size_t recorded = tape.num_recorded_ops();
  tape.stop_recording();
  Tensor b = x * x * 10.0;  // not recorded: a constant as far as the tape knows
  Tensor wb = w * 7.0;      // a read while stopped is not a watched read
  EXPECT_EQ(tape.num_recorded_ops(), recorded);
  tape.resume();
  Tensor c = a + b + x;
  EXPECT_DOUBLE_EQ(tape.gradient(c, x).item<double>(), 7.0);  // 2x + 1
  EXPECT_DOUBLE_EQ(tape.gradient(wb, w).item<double>(), 0.0);
  Tensor wc = w * 4.0;
  EXPECT_DOUBLE_EQ(tape.gradient(wc, w).item<double>(), 4.0);
}

TEST(GradientTapeSemantics, RecordsOnlyWhatTouchesWatchedValues) {
  Tensor x = constant({1.0, 2.0});
  Tensor other = constant({3.0, 4.0});
  Variable frozen(constant({1.0, 1.0}), "frozen", /*trainable=*/false);
  GradientTape tape;
  Tensor noise = exp(other) * 2.0 + frozen;  // nothing watched: nothing kept
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
  tape.watch(x);
  Tensor y = x * noise;
  EXPECT_EQ(tape.num_recorded_ops(), 1u);
  EXPECT_DOUBLE_EQ(tape.gradient(reduce_sum(y + frozen), frozen).to_vector<double>()[0], 0.0);
}

TEST(GradientTapeSemantics, ExplicitlyWatchedNonTrainableVariable) {
  Variable frozen(constant(3.0), "frozen", /*trainable=*/false);
  GradientTape tape;
  tape.watch(frozen);
  Tensor y = frozen * frozen;
  EXPECT_DOUBLE_EQ(tape.gradient(y, frozen).item<double>(), 6.0);
}

TEST(GradientTapeSemantics, NonPersistentTapeFreesATrainingStep) {
  auto& alloc = CpuAllocator::instance();
  nn::reset_layer_names();
  random::set_seed(3);
  nn::Sequential model{nn::Dense(16, nn::relu), nn::Dropout(0.25, 7), nn::Dense(4)};
  optim::Adam adam(1e-2);
  Tensor x = random::normal({32, 8}, 0, 1, 1);
  Tensor y = cast(random::uniform({32}, 0, 4, 2), int32);
  double first_loss = 0, last_loss = 0;
  auto step = [&] {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, /*training=*/true));
    std::vector<Variable> vars = model.trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
    EXPECT_EQ(tape.num_recorded_ops(), 0u);
    return loss.item<float>();
  };
  first_loss = step();  // builds the layers and Adam's slots
  int64_t baseline = alloc.stats().bytes_in_use;
  for (int i = 0; i < 4; ++i) {
    last_loss = step();
    EXPECT_EQ(alloc.stats().bytes_in_use, baseline) << "after step " << i + 2;
  }
  EXPECT_LT(last_loss, first_loss);
  EXPECT_EQ(adam.variables().size(), 8u);  // m and v of two kernels and two biases
}

TEST(GradientTapeSemantics, ErrorsOnEmptyHandles) {
  GradientTape tape;
  Tensor x = constant(1.0);
  tape.watch(x);
  EXPECT_THROW(tape.watch(Tensor()), InvalidArgument);
  EXPECT_THROW(tape.gradient(x, std::vector<Tensor>{Tensor()}), InvalidArgument);
  EXPECT_THROW(tape.watch(Variable()), InvalidArgument);
  GradientTape other;
  EXPECT_THROW(other.gradient(Tensor(), x), InvalidArgument);
}

}  // namespace
}  // namespace weft
