// weft::function: tracing, the signature cache, captures, side effects and their order.
#include "api/function.h"

#include <gtest/gtest.h>

#include <sstream>

#include "api/devices.h"
#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"
#include "runtime/graph.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

TEST(Function, TracesOncePerSignature) {
  auto f = function([](Tensor a, Tensor b) { return relu(a + b); });
  Tensor a = constant({1.f, -2.f, 3.f}), b = constant({1.f, 1.f, -5.f});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f(a, b).to_vector<float>(), (std::vector<float>{2.f, 0.f, 0.f}));
  EXPECT_EQ(f.tracing_count(), 1);
  f(constant({1.f, 2.f}), constant({3.f, 4.f}));  // another shape
  EXPECT_EQ(f.tracing_count(), 2);
  f(constant({1.0, 2.0}), constant({3.0, 4.0}));  // another dtype
  EXPECT_EQ(f.tracing_count(), 3);
  f(a, b);  // the first signature is still cached
  EXPECT_EQ(f.tracing_count(), 3);
}

// A trace serves calls made under the DeviceScope it was traced in, as tf.function keys its
// traces by the device scope: the ops of a trace record the scope's device, so a call under
// another scope must not reuse it. (With a GPU, calls given GPU tensors and host tensors without
// a scope also trace apart: each runs where eager would, tests/api/eager_vs_traced.h.)
TEST(Function, TracesOncePerDeviceScope) {
  auto f = function([](Tensor a) { return a * 2.f; });
  Tensor a = constant({1.f, -2.f});
  f(a);
  EXPECT_EQ(f.tracing_count(), 1);
  {
    DeviceScope on("/cpu:0");
    EXPECT_EQ(f(a).to_vector<float>(), (std::vector<float>{2.f, -4.f}));
    f(a);
    EXPECT_EQ(f.tracing_count(), 2);
    const Graph g = f.graph(a);
    for (const Operation& op : g.operations())
      if (op.type() == "Mul") {
        EXPECT_EQ(op.node().requested_device, "/cpu:0");
      }
  }
  f(a);  // the unscoped trace is still cached
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(Function, ResultIsConcreteAndNamedLikeEager) {
  auto f = function([](Tensor x) { return x * 2.f; });
  Tensor y = f(constant({1.f, 2.f}));
  EXPECT_FALSE(y.is_symbolic());
  EXPECT_EQ(y.name(), "");
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2.f, 4.f}));
}

TEST(Function, NonTensorArgumentsArePartOfTheSignature) {
  int traces_seen = 0;
  auto f = function([&](Tensor x, float scale, bool negate) {
    ++traces_seen;
    Tensor y = x * scale;
    return negate ? -y : y;
  });
  Tensor x = constant({1.f, 2.f});
  EXPECT_EQ(f(x, 2.f, false).to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  EXPECT_EQ(f(x, 2.f, true).to_vector<float>(), (std::vector<float>{-2.f, -4.f}));
  EXPECT_EQ(f(x, 3.f, false).to_vector<float>(), (std::vector<float>{3.f, 6.f}));
  EXPECT_EQ(f(x, 2.f, false).to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(traces_seen, 3);  // the C++ body runs only when tracing
}

TEST(Function, RelaxShapesServesEveryBatchSizeFromOneRelaxedTrace) {
  auto f = function([](Tensor x) { return reduce_sum(x * x, {1}); }, {.relax_shapes = true});
  for (int64_t batch = 1; batch <= 6; ++batch) {
    std::vector<float> data(static_cast<size_t>(batch * 3), 1.f);
    Tensor out = f(constant(data, {batch, 3}));
    EXPECT_EQ(out.shape(), (Shape{batch}));
    EXPECT_EQ(out.to_vector<float>(), std::vector<float>(static_cast<size_t>(batch), 3.f));
  }
  EXPECT_EQ(f.tracing_count(), 2);  // the first shape, then one trace with an unknown batch dim
  Graph g = f.graph(constant(std::vector<float>(30, 1.f), {10, 3}));
  EXPECT_EQ(g.tensor("input_0:0").shape(), (Shape{-1, 3}));
}

TEST(Function, InputSignatureFixesTheTraceAndRejectsOthers) {
  auto f = function([](Tensor x) { return x + 1.f; }, {.input_signature = {TensorSpec{float32, {-1, 2}}}});
  EXPECT_EQ(f(constant({{1.f, 2.f}})).to_vector<float>(), (std::vector<float>{2.f, 3.f}));
  EXPECT_EQ(f(constant({{1.f, 2.f}, {3.f, 4.f}})).shape(), (Shape{2, 2}));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_THROW(f(constant({1.f, 2.f})), InvalidArgument);
  EXPECT_THROW(f(constant({{1, 2}})), InvalidArgument);
}

TEST(Function, ReturnsVectorsTuplesAndNothing) {
  auto pair = function([](Tensor a, Tensor b) { return std::tuple<Tensor, Tensor>{a + b, a - b}; });
  auto [s, d] = pair(constant(5.f), constant(3.f));
  EXPECT_EQ(s.item<float>(), 8.f);
  EXPECT_EQ(d.item<float>(), 2.f);
  auto list = function([](Tensor a) { return std::vector<Tensor>{a, a * a, a * a * a}; });
  auto powers = list(constant(2.f));
  ASSERT_EQ(powers.size(), 3u);
  EXPECT_EQ(powers[2].item<float>(), 8.f);
  Variable v(constant(0.f), "counter");
  auto bump = function([&]() { v.assign_add(constant(1.f)); });
  bump();
  bump();
  EXPECT_EQ(v.value().item<float>(), 2.f);  // a function returning nothing still runs its updates
}

TEST(Function, EagerTensorsAreCapturedAsConstantsAndVariablesReadAtRunTime) {
  Tensor offset = constant({10.f, 20.f});
  Variable w(constant({1.f, 1.f}), "w");
  auto f = function([&](Tensor x) { return x * w + offset; });
  Tensor x = constant({1.f, 2.f});
  EXPECT_EQ(f(x).to_vector<float>(), (std::vector<float>{11.f, 22.f}));
  w.assign(constant({3.f, 4.f}));
  EXPECT_EQ(f(x).to_vector<float>(), (std::vector<float>{13.f, 28.f}));  // the new value, no retrace
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(Function, VariableUpdatesRunInProgramOrder) {
  Variable v(constant(1.f), "v");
  auto f = function([&]() {
    Tensor before = v.value();
    v.assign(v.value() * 3.f);
    Tensor middle = v.value();
    v.assign_add(constant(1.f));
    return std::vector<Tensor>{before, middle, v.value()};
  });
  auto r = f();
  EXPECT_EQ(r[0].item<float>(), 1.f);
  EXPECT_EQ(r[1].item<float>(), 3.f);
  EXPECT_EQ(r[2].item<float>(), 4.f);
  r = f();
  EXPECT_EQ(r[0].item<float>(), 4.f);
  EXPECT_EQ(r[2].item<float>(), 13.f);
}

TEST(Function, PrintRunsOnEveryCallStreamingPrintsOnlyWhileTracing) {
  std::ostringstream trace_log;
  auto f = function([&](Tensor x) {
    Tensor y = x + 1.f;
    trace_log << y << "\n";
    return print(y, "y = ");
  });
  ::testing::internal::CaptureStderr();
  f(constant({1.f}));
  f(constant({2.f}));
  f(constant({3.f}));
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("y = [2]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("[4]"), std::string::npos) << printed;
  EXPECT_EQ(trace_log.str(), "Tensor(\"Add:0\", shape=(1,), dtype=float32)\n");
}

TEST(Function, PrintWhoseResultIsUnusedStillRuns) {
  auto f = function([](Tensor x) {
    print(x * 2.f, "doubled: ");
    return x;
  });
  ::testing::internal::CaptureStderr();
  f(constant({21.f}));
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("doubled: [42]"), std::string::npos) << printed;
}

TEST(Function, StatelessWorkReachingNoResultIsPruned) {
  auto f = function([](Tensor x) {
    Tensor unused = matmul(x, x);
    (void)unused;
    return x + 1.f;
  });
  Tensor x = constant({{1.f, 2.f}, {3.f, 4.f}});
  Graph g = f.graph(x);
  for (const Operation& op : g.operations()) EXPECT_NE(op.type(), "MatMul");
}

TEST(Function, LayersBuiltLazilyInsideATraceCreateTheirVariablesOutside) {
  nn::Dense dense(4, nn::relu);
  auto f = function([&](Tensor x) { return dense(x); });
  Tensor x = random::normal({3, 5}, 0, 1, 7);
  Tensor traced = f(x);
  ASSERT_EQ(dense.trainable_variables().size(), 2u);
  EXPECT_FALSE(dense.trainable_variables()[0].value().is_symbolic());
  Tensor eager = dense(x);
  EXPECT_EQ(traced.to_vector<float>(), eager.to_vector<float>());
}

TEST(Function, CreatingAVariableOnALaterTraceThrows) {
  std::vector<Variable> made;
  auto f = function([&](Tensor x) {
    made.emplace_back(zeros(x.shape()), "v");
    return x + made.back();
  });
  f(constant({1.f}));
  EXPECT_THROW(f(constant({1.f, 2.f})), FailedPrecondition);
}

TEST(Function, RunFunctionsEagerlyTurnsTracingOff) {
  auto f = function([](Tensor x) { return x * x; });
  run_functions_eagerly(true);
  EXPECT_EQ(f(constant(3.f)).item<float>(), 9.f);
  run_functions_eagerly(false);
  EXPECT_EQ(f.tracing_count(), 0);
  EXPECT_EQ(f(constant(3.f)).item<float>(), 9.f);
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(Function, GradientTapeInsideTracesTheBackwardPass) {
  Variable w(constant({{1.f, 2.f}, {3.f, 4.f}}), "w");
  auto grad = function([&](Tensor x) {
    GradientTape tape;
    Tensor loss = reduce_sum(matmul(x, w));
    return tape.gradient(loss, w);
  });
  Tensor x = constant({{1.f, 1.f}});
  Tensor traced = grad(x);
  GradientTape tape;
  Tensor loss = reduce_sum(matmul(x, w));
  Tensor eager = tape.gradient(loss, w);
  EXPECT_EQ(traced.to_vector<float>(), eager.to_vector<float>());
}

TEST(Function, OuterTapeSeesTheFunctionsOps) {
  auto f = function([](Tensor x) { return x * x; });
  Tensor x = constant(3.f);
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  EXPECT_EQ(tape.gradient(y, x).item<float>(), 6.f);
}

TEST(Function, ShapeErrorsNameTheNodeAndTheUsersLine) {
  auto f = function([](Tensor a, Tensor b) { return matmul(a, b); });
  try {
    f(constant({{1.f, 2.f}}), constant({{1.f, 2.f}}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'MatMul'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("function_test.cpp:"), std::string::npos) << msg;
  }
}

TEST(Function, FrequentRetracingWarnsOnceNamingTheCause) {
  auto f = function([](Tensor x) { return x + 1.f; });
  ::testing::internal::CaptureStderr();
  for (int64_t n = 1; n <= 8; ++n) f(zeros({n}));
  std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("traced"), std::string::npos) << warned;
  EXPECT_NE(warned.find("argument 0 changed from float32("), std::string::npos) << warned;
  EXPECT_EQ(warned.find("warning", warned.find("warning") + 1), std::string::npos);  // once
}

TEST(Function, ArgumentsHeldByOneHandleAreNeverWrittenOver) {
  // Arguments are lent to the graph without a reference of their own, so an elementwise node
  // must not take an argument's buffer for its output though the caller holds it only once.
  auto f = function([](Tensor x) { return relu(-x); });
  Tensor x = constant({1.f, -2.f, 3.f});
  ASSERT_EQ(tensor_impl(x)->ref_count(), 1);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(f(x).to_vector<float>(), (std::vector<float>{0.f, 2.f, 0.f}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1.f, -2.f, 3.f}));
  EXPECT_EQ(tensor_impl(x)->ref_count(), 1);
  auto identity = function([](Tensor t) { return t; });
  Tensor same = identity(x);
  EXPECT_TRUE(same.same_as(x));
  EXPECT_EQ(tensor_impl(x)->ref_count(), 2);
}

TEST(Function, ASteadySignatureStillChecksEveryCall) {
  // After ten calls with one signature, calls skip the cache's lock; everything else must still
  // retrace or be refused as before.
  auto f = function([](Tensor x) { return x * 2.f; });
  Tensor x = constant({1.f, 2.f});
  for (int i = 0; i < 12; ++i) f(x);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f(constant({1.f, 2.f, 3.f})).to_vector<float>(), (std::vector<float>{2.f, 4.f, 6.f}));
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(f(constant({1, 2})).to_vector<int32_t>(), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_THROW(f(Tensor()), InvalidArgument);
  auto g = function([](Tensor x) { return x + 1.f; }, {.input_signature = {TensorSpec{float32, {-1}}}});
  for (int i = 0; i < 12; ++i) g(x);
  EXPECT_THROW(g(constant({1.0, 2.0})), InvalidArgument);
  EXPECT_EQ(g(constant({5.f})).to_vector<float>(), (std::vector<float>{6.f}));
  EXPECT_EQ(g.tracing_count(), 1);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(FunctionRandom, UnseededOpsDrawNewNumbersOnEveryCallSeededOnesRepeat) {
  auto unseeded = function([](Tensor x) { return x + random::uniform({4}); });
  auto seeded = function([](Tensor x) { return x + random::uniform({4}, 0, 1, /*seed=*/5); });
  Tensor x = zeros({4});
  EXPECT_NE(unseeded(x).to_vector<float>(), unseeded(x).to_vector<float>());
  EXPECT_EQ(seeded(x).to_vector<float>(), seeded(x).to_vector<float>());
  EXPECT_EQ(seeded(x).to_vector<float>(), random::uniform({4}, 0, 1, 5).to_vector<float>());  // same as eager
}

TEST(FunctionRandom, DropoutOverAnUnknownBatch) {
  nn::Dropout drop(0.5);
  auto f = function([&](Tensor x) { return drop(x, /*training=*/true); }, {.relax_shapes = true});
  for (int64_t batch : {2, 3, 9}) {
    Tensor out = f(ones({batch, 64}));
    EXPECT_EQ(out.shape(), (Shape{batch, 64}));
    int zeros_seen = 0;
    for (float v : out.to_vector<float>()) {
      EXPECT_TRUE(v == 0.f || v == 2.f) << v;
      zeros_seen += v == 0.f;
    }
    EXPECT_GT(zeros_seen, 0);
  }
  EXPECT_LE(f.tracing_count(), 2);
}

}  // namespace
}  // namespace weft
