// Eager fusion where it is on by default: on a GPU. tests/api/eager_fusion_test.cpp runs the
// mechanism on the CPU (EagerFusion::All); here every way a pending GPU tensor is read — a host
// copy, another thread, a copy to the CPU or to another GPU, a function's and a Session's feed, a
// kernel that cannot be fused — gives the bits of the separate ops, run with fusion off.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "api/eager_fusion.h"
#include "reference.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

using ref::gpu_count;

bool pending(const Tensor& t) { return !tensor_impl(t)->pending_done(); }

class GpuEagerFusion : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no GPU";
    saved_ = eager_fusion();
    set_eager_fusion(EagerFusion::Gpus);
    DeviceScope s("/gpu:0");
    a_ = random::normal({257, 33}, 0, 1, 41);  // on the GPU
    b_ = random::normal({257, 33}, 0, 1, 42);
    c_ = random::normal({33}, 0, 1, 43);
    evaluate(a_);
    evaluate(b_);
    evaluate(c_);
  }
  void TearDown() override { set_eager_fusion(saved_); }

  // The chain every test reads, on the GPU.
  Tensor program() const {
    DeviceScope s("/gpu:0");
    return tanh(relu(a_ + b_) * c_ - exp(a_) / (abs(b_) + 1.f));
  }
  // Its bits with every op run when called.
  std::vector<float> separate_ops() {
    set_eager_fusion(EagerFusion::Off);
    std::vector<float> v = program().to_vector<float>();
    set_eager_fusion(EagerFusion::Gpus);
    return v;
  }
  static bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  }

  EagerFusion saved_ = EagerFusion::Gpus;
  Tensor a_, b_, c_;
};

TEST_F(GpuEagerFusion, AChainStaysPendingOnTheGpuAndGivesTheSeparateOpsBits) {
  const std::vector<float> want = separate_ops();
  Tensor y = program();
  EXPECT_TRUE(pending(y));
  EXPECT_NE(y.device().find("GPU:0"), std::string::npos) << y.device();
  EXPECT_TRUE(same_bits(y.to_vector<float>(), want));
  EXPECT_FALSE(pending(y));
}

TEST_F(GpuEagerFusion, CopiesToTheCpuAndToAnotherGpuComputeItFirst) {
  const std::vector<float> want = separate_ops();
  Tensor on_cpu = program().to(cpu_device());
  EXPECT_TRUE(same_bits(on_cpu.to_vector<float>(), want)) << "to the CPU";
  if (gpu_count() >= 2) {
    Tensor on_gpu1 = program().to(find_device("/gpu:1"));
    EXPECT_TRUE(same_bits(on_gpu1.to_vector<float>(), want)) << "to GPU 1";
  }
}

TEST_F(GpuEagerFusion, AKernelThatCannotBeFusedReadsItsPendingInputsComputed) {
  set_eager_fusion(EagerFusion::Off);
  Tensor want;
  {
    DeviceScope s("/gpu:0");
    want = matmul(relu(a_ - b_), transpose(a_ * 2.f));
  }
  set_eager_fusion(EagerFusion::Gpus);
  DeviceScope s("/gpu:0");
  Tensor h = relu(a_ - b_), t = a_ * 2.f;
  ASSERT_TRUE(pending(h));
  Tensor got = matmul(h, transpose(t));
  EXPECT_TRUE(same_bits(got.to_vector<float>(), want.to_vector<float>()));
}

TEST_F(GpuEagerFusion, ThreadsReadingAndMakingPendingGpuTensorsAgree) {
  const std::vector<float> want = separate_ops();
  Tensor shared = program();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        Tensor own = program();
        if (!same_bits(own.to_vector<float>(), want) || !same_bits(shared.to_vector<float>(), want)) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(GpuEagerFusion, PendingGpuTensorsFeedFunctionsAndSessions) {
  set_eager_fusion(EagerFusion::Off);
  std::vector<float> want;
  {
    DeviceScope s("/gpu:0");
    want = (relu(program()) * 3.f).to_vector<float>();
  }
  set_eager_fusion(EagerFusion::Gpus);
  auto f = function([](Tensor x) { return relu(x) * 3.f; });
  EXPECT_TRUE(same_bits(f(program()).to_vector<float>(), want)) << "a function";

  Graph g;
  Tensor x, y;
  {
    GraphScope scope(g);
    x = placeholder(float32, {257, 33}, "x");
    DeviceScope on("/gpu:0");
    y = relu(x) * 3.f;
  }
  Session sess(g);
  Tensor feed = program();
  ASSERT_TRUE(pending(feed));
  EXPECT_TRUE(same_bits(sess.run({{x, feed}}, {y})[0].to_vector<float>(), want)) << "a Session";
}

}  // namespace
}  // namespace weft
