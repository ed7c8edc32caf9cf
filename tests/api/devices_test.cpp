// list_devices, DeviceScope and where eager results live.
#include <gtest/gtest.h>
#include <unistd.h>

#include "reference.h"
#include "runtime/device.h"

namespace weft {
namespace {

constexpr const char* kCpuName = "/job:localhost/replica:0/task:0/device:CPU:0";

bool has_gpu() { return ref::gpu_count() > 0; }

TEST(Devices, CpuComesFirstWithItsFullName) {
  std::vector<DeviceInfo> devices = list_devices();
  ASSERT_FALSE(devices.empty());
  const DeviceInfo& cpu = devices.front();
  EXPECT_EQ(cpu.name, kCpuName);
  EXPECT_EQ(cpu.type, "CPU");
  EXPECT_GE(cpu.cores, 1);
  EXPECT_GT(cpu.memory_bytes, 0);
  EXPECT_FALSE(cpu.description.empty());
  // At least what the kernel reports: hwloc alone can under-report inside containers.
  int64_t phys = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_GE(cpu.memory_bytes, phys);
  // The logical CPUs (one unless WEFT_LOGICAL_CPUS says otherwise), then the GPUs.
  size_t cpus = static_cast<size_t>(logical_cpus());
  ASSERT_GE(devices.size(), cpus);
  for (size_t i = 0; i < cpus; ++i)
    EXPECT_EQ(devices[i].name, "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i));
  for (size_t i = cpus; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].type, "GPU");
    EXPECT_EQ(devices[i].name, "/job:localhost/replica:0/task:0/device:GPU:" + std::to_string(i - cpus));
  }
}

TEST(Devices, EagerTensorsLiveOnTheCpu) {
  Tensor x = constant({1.f, 2.f});
  EXPECT_EQ(x.device(), kCpuName);
  EXPECT_EQ((x + 1).device(), kCpuName);
  EXPECT_EQ(range(3).device(), kCpuName);
}

TEST(Devices, GpuScopeWithoutGpuSoftPlacesOnCpu) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  DeviceScope s("/gpu:0");
  EXPECT_EQ(current_device_request(), "/gpu:0");
  Tensor y = constant({1.f, 2.f}) * 3;
  EXPECT_EQ(y.device(), kCpuName);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3.f, 6.f}));
}

TEST(Devices, ScopesNestAndRestore) {
  EXPECT_EQ(current_device_request(), "");
  {
    DeviceScope outer("/cpu:0");
    EXPECT_EQ(current_device_request(), "/cpu:0");
    {
      DeviceScope inner("/device:CPU:0");
      EXPECT_EQ(current_device_request(), "/device:CPU:0");
      EXPECT_EQ((constant(1) + 1).device(), kCpuName);
    }
    EXPECT_EQ(current_device_request(), "/cpu:0");
  }
  EXPECT_EQ(current_device_request(), "");
}

TEST(Devices, MalformedScopeThrows) {
  EXPECT_THROW(DeviceScope("/tpu:0"), InvalidArgument);
  EXPECT_THROW(DeviceScope("/device:CPU:x"), InvalidArgument);
  EXPECT_EQ(current_device_request(), "") << "a failed scope must not stay pushed";
}

TEST(Devices, LogicalCpuCountIsFixedOnceDevicesExist) {
  list_devices();
  int n = logical_cpus();  // 1 unless WEFT_LOGICAL_CPUS says otherwise
  EXPECT_NO_THROW(set_logical_cpus(n)) << "asking for the count the devices have changes nothing";
  try {
    set_logical_cpus(n + 1);
    FAIL() << "changing the count after the devices exist must fail";
  } catch (const FailedPrecondition& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("[set_logical_cpus]", 0), 0u) << m;
    EXPECT_NE(m.find("already created its devices with " + std::to_string(n)), std::string::npos) << m;
  }
  EXPECT_EQ(logical_cpus(), n);
  int cpus = 0;
  for (const DeviceInfo& d : list_devices()) cpus += d.type == "CPU";
  EXPECT_EQ(cpus, n);
}

TEST(Devices, LogicalCpuCountMustBeSane) {
  for (int bad : {0, -1, 257, 1 << 30}) {
    try {
      set_logical_cpus(bad);
      ADD_FAILURE() << bad << " logical CPUs accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

TEST(Devices, CpuScopeBeyondTheLogicalCpusSoftPlacesOnCpu0) {
  if (logical_cpus() != 1) GTEST_SKIP() << "WEFT_LOGICAL_CPUS is set";
  EXPECT_EQ(find_device("/cpu:1"), nullptr);
  DeviceScope s("/cpu:1");
  EXPECT_EQ((constant(1.f) + 1.f).device(), kCpuName);
}

}  // namespace
}  // namespace weft
