// Start-up device reports decoded as untrusted input: every malformation an InvalidArgument
// naming the task, never std::terminate, and sizes and depth bounded before parsing.
#include <gtest/gtest.h>

#include <string>

#include "cluster/startup.h"
#include "runtime/error.h"

namespace weft {
namespace {

const std::string kTask = "/job:worker/replica:0/task:2 (rank 2)";

std::string error_of(const std::string& text) {
  try {
    parse_device_report(text, kTask);
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error for " << text.substr(0, 80) << ": " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error for " << text.substr(0, 80);
  return "";
}

TEST(DeviceReport, AWellFormedReportGivesItsDevicesOrItsError) {
  DeviceReport r = parse_device_report(
      R"({"devices": [{"name": "/job:worker/replica:0/task:2/device:CPU:0", "type": "CPU", "memory": 1024,
          "cores": 4, "description": "x86"}]})",
      kTask);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].name, "/job:worker/replica:0/task:2/device:CPU:0");
  EXPECT_EQ(r.devices[0].memory_bytes, 1024);
  EXPECT_EQ(r.devices[0].cores, 4);
  EXPECT_EQ(parse_device_report(R"({"error": "no GPU 3 here"})", kTask).error, "no GPU 3 here");
}

TEST(DeviceReport, EveryMalformationNamesTheTask) {
  const std::string bad[] = {
      "",
      "not json",
      "[1, 2, 3]",
      R"({"devices": 5})",
      R"({"devices": [{"name": "a"}]})",
      R"({"devices": [{"name": 1, "type": "CPU", "memory": 1, "cores": 1, "description": ""}]})",
      R"({"devices": [{"name": "a", "type": "CPU", "memory": -1, "cores": 1, "description": ""}]})",
      R"({"devices": [{"name": "a", "type": "CPU", "memory": 1, "cores": 99999999999, "description": ""}]})",
      R"({"devices": [{"name": "", "type": "CPU", "memory": 1, "cores": 1, "description": ""}]})",
      R"({"error": 17})",
      R"({"devices": [)",
      "{\"devices\": [{\"name\": \"\xff\xfe\", \"type\": \"CPU\", \"memory\": 1, \"cores\": 1, \"description\": \"\"}]}",
  };
  for (const std::string& text : bad) {
    const std::string what = error_of(text);
    EXPECT_NE(what.find(kTask), std::string::npos) << what;
  }
}

TEST(DeviceReport, DepthAndSizeAreBoundedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of(deep).find("nested 100000 deep"), std::string::npos);
  // Brackets inside strings are text, not nesting.
  EXPECT_NE(error_of(R"({"error": 5, "x": "[[[[[[[[[["})").find("malformed"), std::string::npos);
  const std::string huge = R"({"error": ")" + std::string(kMaxDeviceReportBytes, 'x') + "\"}";
  EXPECT_NE(error_of(huge).find("over the limit"), std::string::npos);
}

}  // namespace
}  // namespace weft
