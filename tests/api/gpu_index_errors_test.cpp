// Out-of-range ids met on a GPU, through the front end: an eager gather and a traced one fail at
// the next read of a value with the CPU's message, once. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reference.h"
#include "runtime/device.h"

namespace weft {
namespace {

bool has_gpu() { return ref::gpu_count() > 0; }

// The message of the InvalidArgument `f` throws, or "" when it throws none.
template <class F>
std::string invalid_argument(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

Tensor table() { return constant(ref::random_values<float>(5 * 3, 21, -1, 1), Shape{5, 3}); }

TEST(GpuIndexErrors, AnEagerGatherFailsAtTheNextReadNamingTheOpAndTheIndex) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const Tensor params = table();
  const Tensor bad = constant(std::vector<int32_t>{0, 7, 1}, Shape{3});
  const Tensor good = constant(std::vector<int32_t>{4, 0, 4, 2}, Shape{4});
  const std::string cpu = invalid_argument([&] { gather(params, bad).to_vector<float>(); });
  ASSERT_NE(cpu.find("indices[1] = 7"), std::string::npos) << cpu;
  DeviceScope on("/gpu:0");
  Tensor out;
  EXPECT_EQ(invalid_argument([&] { out = gather(params, bad); }), "") << "the call does not wait for the GPU";
  const std::string gpu = invalid_argument([&] { out.to_vector<float>(); });
  EXPECT_NE(gpu.find("[gather]"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("indices[1] = 7 is out of range"), std::string::npos) << gpu;
  // Raised once; the next call is good.
  std::vector<float> want;
  {
    DeviceScope cpu_scope("/cpu:0");
    want = gather(params, good).to_vector<float>();
  }
  EXPECT_EQ(gather(params, good).to_vector<float>(), want);
}

TEST(GpuIndexErrors, ATracedGatherFailsAtTheNextReadAndTheNextCallIsGood) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const Tensor params = table();
  auto lookup = function([&](Tensor ids) {
    DeviceScope on("/gpu:0");
    return gather(params, ids) * 2.f;
  });
  const Tensor good = constant(std::vector<int64_t>{3, 3, 1}, Shape{3});
  const Tensor bad = constant(std::vector<int64_t>{3, -2, 1}, Shape{3});
  const std::vector<float> want = (gather(params, good) * 2.f).to_vector<float>();
  EXPECT_EQ(lookup(good).to_vector<float>(), want);
  const std::string msg = invalid_argument([&] { lookup(bad).to_vector<float>(); });
  EXPECT_NE(msg.find("[gather]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("indices[1] = -2 is out of range"), std::string::npos) << msg;
  EXPECT_EQ(invalid_argument([&] { EXPECT_EQ(lookup(good).to_vector<float>(), want); }), "");
}

}  // namespace
}  // namespace weft
