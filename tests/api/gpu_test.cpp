// GPU kernels against the CPU. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include "reference.h"

namespace weft {
namespace {

bool has_gpu() {
  for (const DeviceInfo& d : list_devices())
    if (d.type == "GPU") return true;
  return false;
}

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

}  // namespace
}  // namespace weft
