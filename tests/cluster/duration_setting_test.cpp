// The millisecond settings every task reads from its environment (runtime/duration_setting.h).
#include "runtime/duration_setting.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

using std::chrono::milliseconds;

TEST(DurationSetting, UnsetOrEmptyGivesTheFallbackSilently) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", nullptr, milliseconds(30000)), milliseconds(30000));
  EXPECT_EQ(milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", "", milliseconds(30000)), milliseconds(30000));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(DurationSetting, AMalformedValueIsReportedByNameAndTheFallbackUsed) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", "3s", milliseconds(30000)), milliseconds(30000));
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("WEFT_STARTUP_TIMEOUT_MS='3s' is not a positive whole number of milliseconds; using 30000"),
            std::string::npos)
      << said;
  EXPECT_EQ(milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", "4500", milliseconds(30000)), milliseconds(4500));
}

}  // namespace
}  // namespace weft
