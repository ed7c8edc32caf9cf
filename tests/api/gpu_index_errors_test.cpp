// Out-of-range ids met on a GPU, through the front end: an eager gather and a traced one fail at
// the next read of a value with the CPU's message, once; and the gradient of an embedding lookup
// (an UnsortedSegmentSum) is the CPU's, bit for bit. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <bit>
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

// d/dtable of sum(gather(table, ids) * w) with many repeated ids: the GPU's UnsortedSegmentSum
// adds each row's contributions in the CPU's order, so the two gradients have the same bits.
TEST(GpuIndexErrors, AnEmbeddingGradientIsTheCpusBitForBit) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const int64_t vocab = 50, dim = 16, n = 4000;
  const Tensor table_values = constant(ref::random_values<float>(vocab * dim, 31, -1, 1), Shape{vocab, dim});
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * i + 7 * i) % 11);
  const Tensor id_tensor = constant(ids, Shape{n});
  const Tensor w = constant(ref::random_values<float>(n * dim, 32, -100, 100), Shape{n, dim});
  auto gradient_on = [&](const char* device) {
    DeviceScope on(device);
    Tensor t = table_values.to(find_device(device));
    GradientTape tape;
    tape.watch(t);
    Tensor loss = reduce_sum(gather(t, id_tensor) * w);
    return tape.gradient(loss, t).to_vector<float>();
  };
  const std::vector<float> cpu = gradient_on("/cpu:0");
  const std::vector<float> gpu = gradient_on("/gpu:0");
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(cpu[i]), std::bit_cast<uint32_t>(gpu[i])) << "element " << i;
  EXPECT_EQ(gradient_on("/gpu:0"), gpu) << "a second run";
}

}  // namespace
}  // namespace weft
