// GPU kernels against the CPU. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reference.h"
#include "runtime/graph.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

using ref::gpu_count;

bool has_gpu() { return gpu_count() > 0; }

TEST(Gpu, AddMatchesCpu) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (int64_t n : {1, 7, 1000, 1 << 20}) {
    std::vector<float> a = ref::random_values<float>(n, 1, -10, 10), b = ref::random_values<float>(n, 2, -10, 10);
    Tensor ta = constant(a, Shape{n}), tb = constant(b, Shape{n});
    Tensor cpu = ta + tb, gpu;
    {
      DeviceScope s("/gpu:0");
      gpu = ta + tb;
    }
    EXPECT_NE(gpu.device().find("GPU:0"), std::string::npos) << gpu.device();
    EXPECT_EQ(gpu.to_vector<float>(), cpu.to_vector<float>()) << "n = " << n;
  }
}

TEST(Gpu, ReluMatchesCpu) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  std::vector<float> a = ref::random_values<float>(4097, 3, -10, 10);
  Tensor x = constant(a, Shape{4097});
  Tensor gpu;
  {
    DeviceScope s("/gpu:0");
    gpu = relu(x);
  }
  std::vector<float> got = gpu.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i] > 0 ? a[i] : 0.f) << i;
  EXPECT_EQ(got, relu(x).to_vector<float>());
}


// A graph placed over the CPU and the GPU: the feed sits on the CPU, the GPU's part gets it
// through a Recv that queues the upload, the CPU's part gets the GPU's result through a Recv
// that waits for the download, and the fetch is the CPU's answer.
TEST(Gpu, SessionOverCpuAndGpuGivesTheCpusResults) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  Graph g;
  Tensor x, y;
  {
    GraphScope scope(g);
    x = placeholder(float32, {64, 33}, "x");
    Tensor a;
    {
      DeviceScope on("/gpu:0");
      a = relu(x * 2.f) - x;  // on the GPU
    }
    DeviceScope on("/cpu:0");
    y = tanh(a) + x;  // on the CPU, reading the GPU's result and the feed
  }
  Session sess(g);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> xv = ref::random_values<float>(64 * 33, 10 + step, -3, 3);
    const Tensor xt = constant(xv, Shape{64, 33});
    const Tensor got = sess.run({{x, xt}}, {y})[0];
    EXPECT_EQ(got.device_ptr(), cpu_device());
    const std::vector<float> want = (tanh(relu(xt * 2.f) - xt) + xt).to_vector<float>();
    const std::vector<float> have = got.to_vector<float>();
    ASSERT_EQ(have.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(have[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << i;
  }
  // Placed when first run: the GPU's scope holds, the CPU's too.
  const auto placement = sess.placement();
  bool some_gpu = false, some_cpu = false;
  for (const auto& [node, device] : placement) {
    some_gpu |= device.find("GPU:0") != std::string::npos;
    some_cpu |= device.find("CPU:0") != std::string::npos;
  }
  EXPECT_TRUE(some_gpu) << "nothing was placed on the GPU";
  EXPECT_TRUE(some_cpu) << "nothing was placed on the CPU";
}

// A model over two GPUs of one process: the tensors between them go GPU to GPU (directly where
// the driver has a peer path), in a traced step and eagerly alike, and give the CPU's answers.
TEST(Gpu, SessionOverTwoGpusGivesTheCpusResults) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs";
  Graph g;
  Tensor x, y;
  {
    GraphScope scope(g);
    x = placeholder(float32, {1000, 37}, "x");
    Tensor a;
    {
      DeviceScope on("/gpu:0");
      a = relu(x * 2.f) - x;
    }
    DeviceScope on("/gpu:1");
    y = tanh(a) + x;  // reads GPU 0's result
  }
  Session sess(g);
  for (int step = 0; step < 5; ++step) {
    const Tensor xt = constant(ref::random_values<float>(1000 * 37, 20 + step, -3, 3), Shape{1000, 37});
    const std::vector<float> want = (tanh(relu(xt * 2.f) - xt) + xt).to_vector<float>();
    const std::vector<float> have = sess.run({{x, xt}}, {y})[0].to_vector<float>();
    ASSERT_EQ(have.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(have[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << i;
  }
  bool on0 = false, on1 = false;
  for (const auto& [node, device] : sess.placement()) {
    on0 |= device.find("GPU:0") != std::string::npos;
    on1 |= device.find("GPU:1") != std::string::npos;
  }
  EXPECT_TRUE(on0 && on1) << "the graph was not placed over both GPUs";

  const Tensor xt = constant(ref::random_values<float>(4099, 30, -3, 3), Shape{4099});
  Tensor a, b;
  {
    DeviceScope on("/gpu:0");
    a = xt * 3.f;
  }
  {
    DeviceScope on("/gpu:1");
    b = a + a;  // a moves to GPU 1
  }
  EXPECT_NE(b.device().find("GPU:1"), std::string::npos) << b.device();
  EXPECT_EQ(b.to_vector<float>(), ((xt * 3.f) + (xt * 3.f)).to_vector<float>());
}

// A Const on the GPU is uploaded once, when the step's executor is made, and the same buffer
// serves every run: a consumer that may write over an input it holds alone (relu) must not
// write over it, so every run gives relu(c) + x again.
TEST(Gpu, AConstOnTheGpuServesEveryRunUnchanged) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const std::vector<float> cv = ref::random_values<float>(256, 30, -2, 2);
  Graph g;
  Tensor x, y;
  {
    GraphScope scope(g);
    x = placeholder(float32, {256}, "x");
    DeviceScope on("/gpu:0");
    y = relu(constant(cv, Shape{256})) + x;
  }
  Session sess(g);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> xv = ref::random_values<float>(256, 40 + step, -1, 1);
    const std::vector<float> have = sess.run({{x, constant(xv, Shape{256})}}, {y})[0].to_vector<float>();
    for (size_t i = 0; i < cv.size(); ++i) ASSERT_EQ(have[i], std::max(cv[i], 0.f) + xv[i]) << "step " << step << ", " << i;
  }
}

// A variable placed on the GPU is updated in place there, step after step.
TEST(Gpu, SessionTrainsAVariableOnTheGpu) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  Graph g;
  Tensor x, update, read;
  std::unique_ptr<Variable> v;
  {
    GraphScope scope(g);
    x = placeholder(float32, {8}, "x");
    DeviceScope on("/gpu:0");
    v = std::make_unique<Variable>(zeros(Shape{8}), "v");
    update = v->assign_add(x * 0.5f);
    read = v->value();
  }
  Session sess(g);
  std::vector<float> want(8, 0.f);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> xv = ref::random_values<float>(8, 20 + step, -1, 1);
    sess.run({{x, constant(xv, Shape{8})}}, {update});
    for (size_t i = 0; i < 8; ++i) want[i] += xv[i] * 0.5f;
  }
  const std::vector<float> have = sess.run({read})[0].to_vector<float>();
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(have[i], want[i], 1e-6f) << i;
}

// A variable requested on the GPU lives there once a traced step touches it (its value starts on
// the CPU, where its initial value was made), and assign_add updates its buffer in place.
TEST(Gpu, AVariableOnTheGpuIsUpdatedInPlaceByATracedStep) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  std::optional<Variable> v;
  {
    DeviceScope s("/gpu:0");
    v.emplace(constant({1.f, 2.f, 3.f}), "w");
  }
  auto step = function([&](Tensor x) { v->assign_add(x); });
  step(constant({1.f, 1.f, 1.f}));
  EXPECT_NE(v->value().device().find("GPU:0"), std::string::npos) << v->value().device();
  const void* buffer = raw_data(v->value());
  step(constant({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(raw_data(v->value()), buffer) << "assign_add on the GPU must write the variable's buffer in place";
  EXPECT_EQ(v->value().to_vector<float>(), (std::vector<float>{2.5f, 3.5f, 4.5f}));
}

// A traced elementwise chain on the GPU fuses into one FusedElementwise there (the fusion pass),
// a dense layer's bias and relu too (its product stays a MatMul), and gives eager's bits.
TEST(Gpu, TracedElementwiseChainsFuseOnTheGpuWithEagersBits) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const Tensor x = random::uniform({64, 32}, -1, 1, 5), w = random::normal({32, 16}, 0, 0.2, 6);
  const Tensor b = random::normal({16}, 0, 0.2, 7), c = random::uniform({64, 16}, -1, 1, 8);
  auto model = [&](Tensor in) {
    DeviceScope s("/gpu:0");
    Tensor h = relu(add(matmul(in, w), b));
    return sub(mul(h, c), h * 0.5f);
  };
  auto traced = function([&](Tensor in) { return model(in); });
  const Tensor eager = model(x), t = traced(x);
  EXPECT_NE(t.device().find("GPU:0"), std::string::npos) << t.device();
  EXPECT_EQ(t.to_vector<float>(), eager.to_vector<float>()) << "traced against eager";
  int fused = 0, on_gpu = 0, products = 0;
  const Graph g = traced.graph(x);
  for (int32_t id : g.ir().node_ids()) {
    const auto& n = g.ir().node(id);
    if (n.type() == "FusedElementwise") {
      ++fused;
      on_gpu += n.assigned_device.find("GPU:0") != std::string::npos;
    }
    products += n.type() == "MatMul";
  }
  EXPECT_EQ(fused, 2) << "bias and relu; the tail";
  EXPECT_EQ(on_gpu, fused);
  EXPECT_EQ(products, 1);
}

// cond and while_loop traced under the GPU's scope: the If and the While run on the GPU (their
// branches and bodies too, reading the predicate back each time) and give the CPU's results.
TEST(Gpu, CondAndWhileLoopRunOnTheGpu) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  auto body = [](Tensor x, Tensor n) {
    // x doubled n times, then negated where its sum is positive.
    std::vector<Tensor> r = while_loop([](const std::vector<Tensor>& v) { return v[0] < v[2]; },
                                       [](const std::vector<Tensor>& v) -> std::vector<Tensor> {
                                         return {v[0] + 1, v[1] * 2.f, v[2]};
                                       },
                                       {zeros_like(n), x, n});
    Tensor y = r[1];
    return cond(reduce_sum(y) > 0.f, [&] { return -y; }, [&] { return y + 1.f; });
  };
  auto on_gpu = [&body] {
    DeviceScope on("/gpu:0");
    return function([&body](Tensor x, Tensor n) { return body(x, n); });
  }();
  for (int n : {0, 3}) {
    for (float sign : {1.f, -1.f}) {
      const Tensor x = constant({sign * 1.f, sign * 2.f, -0.5f}), steps = constant(n);
      Tensor got;
      Graph g;
      {
        DeviceScope on("/gpu:0");
        got = on_gpu(x, steps);
        g = on_gpu.graph(x, steps);
      }
      EXPECT_EQ(got.to_vector<float>(), body(x, steps).to_vector<float>()) << "n " << n << " sign " << sign;
      for (const Operation& op : g.operations())
        if (op.type() == "If" || op.type() == "While") {
          EXPECT_NE(op.device().find("GPU:0"), std::string::npos) << op.type() << " on " << op.device();
        }
    }
  }
}

}  // namespace
}  // namespace weft
