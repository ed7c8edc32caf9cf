// Device name parsing, printing and matching, and the lookups built on it.
#include <gtest/gtest.h>

#include "runtime/device.h"
#include "runtime/device_name.h"
#include "runtime/error.h"

namespace weft {
namespace {

TEST(DeviceSpec, FullName) {
  DeviceSpec s = DeviceSpec::parse("/job:worker/replica:0/task:1/device:GPU:0");
  ASSERT_TRUE(s.job && s.replica && s.task && s.type && s.index);
  EXPECT_EQ(*s.job, "worker");
  EXPECT_EQ(*s.replica, 0);
  EXPECT_EQ(*s.task, 1);
  EXPECT_EQ(*s.type, DeviceType::CUDA);
  EXPECT_EQ(*s.index, 0);
  EXPECT_EQ(s.to_string(), "/job:worker/replica:0/task:1/device:GPU:0");
}

TEST(DeviceSpec, ShortForms) {
  DeviceSpec cpu = DeviceSpec::parse("/cpu:0");
  EXPECT_FALSE(cpu.job || cpu.replica || cpu.task);
  EXPECT_EQ(cpu.type, DeviceType::CPU);
  EXPECT_EQ(cpu.index, 0);
  EXPECT_EQ(cpu.to_string(), "/device:CPU:0");

  DeviceSpec gpu = DeviceSpec::parse("/gpu:1");
  EXPECT_EQ(gpu.type, DeviceType::CUDA);
  EXPECT_EQ(gpu.index, 1);

  DeviceSpec task = DeviceSpec::parse("/job:worker/task:1");
  EXPECT_EQ(task.job, "worker");
  EXPECT_EQ(task.task, 1);
  EXPECT_FALSE(task.replica || task.type || task.index);
  EXPECT_EQ(task.to_string(), "/job:worker/task:1");

  DeviceSpec dev = DeviceSpec::parse("/device:CPU:0");
  EXPECT_EQ(dev.type, DeviceType::CPU);
  EXPECT_EQ(dev.index, 0);
  EXPECT_FALSE(dev.job);

  DeviceSpec any = DeviceSpec::parse("/device:GPU:*");
  EXPECT_EQ(any.type, DeviceType::CUDA);
  EXPECT_FALSE(any.index);
  EXPECT_EQ(any.to_string(), "/device:GPU:*");

  DeviceSpec empty = DeviceSpec::parse("");
  EXPECT_EQ(empty.to_string(), "");
}

TEST(DeviceSpec, MalformedNamesThrowInvalidArgument) {
  for (const char* bad : {"/job:", "/replica:x", "/task:-1", "/task:", "/device:TPU:0", "/foo:0", "/gpu:abc",
                          "/cpu:0:0", "/device:GPU:1x", "/task:99999999999", "/replica:+1", "/cpu:-0x1"}) {
    try {
      DeviceSpec::parse(bad);
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[device]"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceSpec, Matches) {
  DeviceSpec full = DeviceSpec::parse("/job:worker/replica:0/task:1/device:GPU:0");
  EXPECT_TRUE(DeviceSpec::parse("/gpu:0").matches(full));
  EXPECT_TRUE(DeviceSpec::parse("/job:worker/task:1").matches(full));
  EXPECT_TRUE(DeviceSpec::parse("").matches(full));
  EXPECT_FALSE(DeviceSpec::parse("/gpu:1").matches(full));
  EXPECT_FALSE(DeviceSpec::parse("/cpu:0").matches(full));
  EXPECT_FALSE(DeviceSpec::parse("/job:ps").matches(full));
  EXPECT_FALSE(DeviceSpec::parse("/task:0").matches(full));
}

TEST(DeviceName, LocalNames) {
  EXPECT_EQ(local_device_name(DeviceType::CPU, 0), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(local_device_name(DeviceType::CUDA, 3), "/job:localhost/replica:0/task:0/device:GPU:3");
  DeviceSpec round = DeviceSpec::parse(local_device_name(DeviceType::CUDA, 3));
  EXPECT_EQ(round.to_string(), local_device_name(DeviceType::CUDA, 3));
}

TEST(DeviceName, FindDevice) {
  Device* cpu = cpu_device();
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(find_device("/cpu:0"), cpu);
  EXPECT_EQ(find_device("/device:CPU:0"), cpu);
  EXPECT_EQ(find_device(cpu->name()), cpu);
  EXPECT_EQ(find_device("/job:localhost/device:CPU:0"), cpu);
  EXPECT_EQ(find_device("/job:worker/task:1"), nullptr);  // another process's device
  EXPECT_EQ(find_device("/cpu:1"), nullptr);
  EXPECT_EQ(find_device("/gpu:1000"), nullptr);
  EXPECT_THROW(find_device("/device:TPU:0"), InvalidArgument);
}

}  // namespace
}  // namespace weft
