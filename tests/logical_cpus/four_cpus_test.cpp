// A process with WEFT_LOGICAL_CPUS=4: four CPU devices, each with its own pool, and eager ops
// running where DeviceScope says. ctest runs this suite with that environment; run by hand
// without it, the suite skips.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "api/dispatch.h"
#include "api/weft/weft.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

std::string cpu_name(int i) { return "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i); }

class FourCpus : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("WEFT_LOGICAL_CPUS");
    if (!v || std::string(v) != "4") GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4 in the environment (ctest sets it)";
  }
};

// An op whose kernel reports the device and pool it was given.
std::atomic<Device*> g_kernel_device{nullptr};
std::atomic<ThreadPool*> g_kernel_pool{nullptr};

void which_device_kernel(KernelContext& ctx) {
  g_kernel_device = &ctx.device;
  g_kernel_pool = &ctx.pool();
  std::memcpy(raw_data(ctx.output(0)), raw_data(ctx.input(0)), ctx.input(0).nbytes());
}

const OpDef& which_device_op() {
  static const OpDef& op = []() -> const OpDef& {
    register_builtin_ops();
    OpDef def;
    def.name = "TestWhichDevice";
    def.display = "test_which_device";
    def.min_inputs = def.max_inputs = 1;
    def.infer = [](InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); };
    def.flags = kStateful;
    OpDef& added = op_registry().add(std::move(def));
    register_kernel("TestWhichDevice", DeviceType::CPU, float32, which_device_kernel);
    return added;
  }();
  return op;
}

TEST_F(FourCpus, ListsFourCpuDevicesFirst) {
  std::vector<DeviceInfo> devices = list_devices();
  ASSERT_GE(devices.size(), 4u);
  int cores = std::max(1, host_topology().usable_cores / 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(devices[i].name, cpu_name(i));
    EXPECT_EQ(devices[i].type, "CPU");
    EXPECT_EQ(devices[i].cores, cores) << "each logical CPU gets its share of the physical cores";
    EXPECT_EQ(devices[i].memory_bytes, devices[0].memory_bytes) << "host memory is shared";
    EXPECT_NE(devices[i].description.find("logical CPU " + std::to_string(i) + " of 4"), std::string::npos)
        << devices[i].description;
  }
  for (size_t i = 4; i < devices.size(); ++i) EXPECT_EQ(devices[i].type, "GPU");
  EXPECT_EQ(logical_cpus(), 4);
  EXPECT_TRUE(local_devices_created());
}

TEST_F(FourCpus, FindDeviceByAnyName) {
  const std::vector<Device*>& all = local_devices();
  EXPECT_EQ(cpu_device(), all[0]);
  EXPECT_EQ(cpu_device()->name(), cpu_name(0));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(find_device("/cpu:" + std::to_string(i)), all[i]);
    EXPECT_EQ(find_device("/device:CPU:" + std::to_string(i)), all[i]);
    EXPECT_EQ(find_device(cpu_name(i)), all[i]);
    EXPECT_EQ(all[i]->index(), i);
    EXPECT_EQ(all[i]->type(), DeviceType::CPU);
  }
  EXPECT_EQ(find_device("/cpu:2")->name(), cpu_name(2));
  EXPECT_EQ(find_device("/cpu:4"), nullptr);
  EXPECT_EQ(find_device("/job:worker/task:1/device:CPU:1"), nullptr);
}

TEST_F(FourCpus, EachCpuHasItsOwnPoolAndSharesTheHostAllocator) {
  std::set<ThreadPool*> pools;
  for (int i = 0; i < 4; ++i) {
    Device* d = local_devices()[i];
    pools.insert(&d->pool());
    EXPECT_EQ(d->pool().num_threads(), d->cores());
    EXPECT_EQ(&d->allocator(), &cpu_device()->allocator());
  }
  EXPECT_EQ(pools.size(), 4u);
}

TEST_F(FourCpus, SetLogicalCpusAfterCreation) {
  local_devices();
  EXPECT_NO_THROW(set_logical_cpus(4)) << "the count the devices have is not a change";
  try {
    set_logical_cpus(2);
    FAIL() << "changing the count after the devices exist must fail";
  } catch (const FailedPrecondition& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[set_logical_cpus]"), std::string::npos) << m;
    EXPECT_NE(m.find("already"), std::string::npos) << m;
    EXPECT_NE(m.find("4"), std::string::npos) << m;
  }
  EXPECT_THROW(set_logical_cpus(0), InvalidArgument);
  EXPECT_EQ(logical_cpus(), 4);
}

TEST_F(FourCpus, EagerOpsRunOnTheScopedCpu) {
  Tensor x = constant({1.f, -2.f, 3.f});
  EXPECT_EQ(x.device(), cpu_name(0));
  for (int i = 0; i < 4; ++i) {
    DeviceScope s("/cpu:" + std::to_string(i));
    Tensor y = relu(x * 2.f + 1.f);
    EXPECT_EQ(y.device(), cpu_name(i));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3.f, 0.f, 7.f}));
  }
  Tensor on3;
  {
    DeviceScope s("/cpu:3");
    on3 = matmul(reshape(x, {1, 3}), reshape(x, {3, 1}));
  }
  EXPECT_EQ(on3.device(), cpu_name(3));
  EXPECT_EQ(on3.to_vector<float>(), (std::vector<float>{14.f}));
  // Without a scope an op runs where its first input lives.
  EXPECT_EQ((on3 + 1.f).device(), cpu_name(3));
}

TEST_F(FourCpus, KernelsGetTheScopedDeviceAndItsPool) {
  const OpDef& op = which_device_op();
  Tensor x = constant({1.f, 2.f});
  for (int i : {1, 2, 0, 3}) {
    DeviceScope s("/cpu:" + std::to_string(i));
    Tensor y = dispatch1(op, {x});
    Device* want = local_devices()[i];
    EXPECT_EQ(g_kernel_device.load(), want) << "cpu " << i;
    EXPECT_EQ(g_kernel_pool.load(), &want->pool()) << "cpu " << i;
    EXPECT_EQ(y.device_ptr(), want);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  }
}

TEST_F(FourCpus, NestedScopesRestore) {
  Tensor x = constant(1.f);
  DeviceScope a("/cpu:1");
  {
    DeviceScope b("/cpu:2");
    EXPECT_EQ((x + 1.f).device(), cpu_name(2));
  }
  EXPECT_EQ((x + 1.f).device(), cpu_name(1));
}

TEST_F(FourCpus, ThreadsScopeIndependently) {
  std::vector<std::string> seen(4);
  std::vector<float> sums(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([i, &seen, &sums] {
      DeviceScope s("/cpu:" + std::to_string(i));
      Tensor y = fill({64, 64}, constant(static_cast<float>(i)));
      for (int k = 0; k < 20; ++k) y = y + 1.f;
      Tensor total = reduce_sum(y);
      seen[i] = total.device();
      sums[i] = total.item<float>();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(seen[i], cpu_name(i));
    EXPECT_EQ(sums[i], 64.f * 64.f * static_cast<float>(i + 20));
  }
}

}  // namespace
}  // namespace weft
