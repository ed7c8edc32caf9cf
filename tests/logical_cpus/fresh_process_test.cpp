// How the number of logical CPUs is chosen, seen from a process that has not used its devices
// yet: a malformed WEFT_LOGICAL_CPUS fails the first use (and creates nothing), set_logical_cpus
// overrides the environment, and the count is fixed from the first use on. ctest runs this suite
// alone in its own process with WEFT_LOGICAL_CPUS unset.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "api/weft/weft.h"
#include "runtime/device.h"

namespace weft {
namespace {

constexpr const char* kVar = "WEFT_LOGICAL_CPUS";

// The message of the InvalidArgument that the first device use throws.
std::string first_use_error() {
  try {
    local_devices();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(FreshProcess, LogicalCpusAreChosenBeforeFirstUse) {
  if (std::getenv(kVar)) GTEST_SKIP() << "needs " << kVar << " unset (ctest unsets it)";
  ASSERT_FALSE(local_devices_created()) << "nothing may use the devices before this test: not static "
                                           "initialisation, not another test of this binary";

  for (const char* bad : {"0", "-1", "257", "abc", "4x", " 4", "4 ", "+4", "0x4", "99999999999", "2.5"}) {
    SCOPED_TRACE(std::string(kVar) + "='" + bad + "'");
    ASSERT_EQ(setenv(kVar, bad, 1), 0);
    std::string m = first_use_error();
    EXPECT_NE(m.find(kVar), std::string::npos) << "the error names the variable: " << m;
    EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << "and its value: " << m;
    EXPECT_THROW(cpu_device(), InvalidArgument);
    EXPECT_THROW(logical_cpus(), InvalidArgument);
    EXPECT_FALSE(local_devices_created()) << "a failed first use creates nothing";
  }

  ASSERT_EQ(setenv(kVar, "2", 1), 0);
  EXPECT_EQ(logical_cpus(), 2) << "the environment decides while set_logical_cpus was not called";
  ASSERT_EQ(setenv(kVar, "", 1), 0);
  EXPECT_EQ(logical_cpus(), 1) << "an empty value is the same as none";

  EXPECT_THROW(set_logical_cpus(0), InvalidArgument);
  EXPECT_THROW(set_logical_cpus(-3), InvalidArgument);
  EXPECT_THROW(set_logical_cpus(kMaxLogicalCpus + 1), InvalidArgument);
  try {
    set_logical_cpus(1000);
    ADD_FAILURE() << "1000 logical CPUs must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[set_logical_cpus]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(local_devices_created());

  // The call overrides the environment, even a malformed one, and may change its mind until the
  // devices exist.
  ASSERT_EQ(setenv(kVar, "junk", 1), 0);
  set_logical_cpus(5);
  set_logical_cpus(3);
  EXPECT_EQ(logical_cpus(), 3);
  EXPECT_FALSE(local_devices_created());

  std::vector<DeviceInfo> devices = list_devices();
  ASSERT_GE(devices.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(devices[i].name, "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i));
  if (devices.size() > 3) {
    EXPECT_EQ(devices[3].type, "GPU");
  }
  EXPECT_TRUE(local_devices_created());
  EXPECT_EQ(logical_cpus(), 3);
  EXPECT_NO_THROW(set_logical_cpus(3));
  EXPECT_THROW(set_logical_cpus(4), FailedPrecondition);
  EXPECT_THROW(set_logical_cpus(1), FailedPrecondition);
  EXPECT_EQ(find_device("/cpu:2"), local_devices()[2]);
  EXPECT_EQ(find_device("/cpu:3"), nullptr);
  unsetenv(kVar);
}

}  // namespace
}  // namespace weft
