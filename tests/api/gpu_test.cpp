// GPU kernels against the CPU. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

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
  const void* buffer = v->value().raw_data();
  step(constant({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(v->value().raw_data(), buffer) << "assign_add on the GPU must write the variable's buffer in place";
  EXPECT_EQ(v->value().to_vector<float>(), (std::vector<float>{2.5f, 3.5f, 4.5f}));
}

}  // namespace
}  // namespace weft
