// WEFT_LIVENESS_TIMEOUT_MS is read by every task of a cluster: a malformed value is reported and
// the default used, and one too short for the chief's pings (which would make healthy idle tasks
// look lost) is reported and raised to the shortest that works.
#include "cluster/cluster_runtime.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

using std::chrono::milliseconds;

TEST(LivenessTimeout, UnsetOrEmptyIsTheDefault) {
  EXPECT_EQ(liveness_timeout_from(nullptr), milliseconds(10000));
  EXPECT_EQ(liveness_timeout_from(""), milliseconds(10000));
}

TEST(LivenessTimeout, AWholeNumberOfMillisecondsIsTaken) {
  EXPECT_EQ(liveness_timeout_from("3000"), milliseconds(3000));
  EXPECT_EQ(liveness_timeout_from("2000"), kMinLivenessTimeout);
}

TEST(LivenessTimeout, MalformedValuesAreReportedAndTheDefaultUsed) {
  for (const char* bad : {"abc", "12ms", "-5", "0", "1.5", "99999999999999999999999"}) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(liveness_timeout_from(bad), milliseconds(10000)) << bad;
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("WEFT_LIVENESS_TIMEOUT_MS='" + std::string(bad) + "'"), std::string::npos) << said;
    EXPECT_NE(said.find("not a positive whole number of milliseconds"), std::string::npos) << said;
  }
}

TEST(LivenessTimeout, OneTooShortForThePingsIsRaisedToTheShortest) {
  static_assert(kMinLivenessTimeout > kPingInterval);
  testing::internal::CaptureStderr();
  EXPECT_EQ(liveness_timeout_from("1000"), kMinLivenessTimeout);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("WEFT_LIVENESS_TIMEOUT_MS=1000 is shorter than the shortest liveness timeout, 2000 ms"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("pings every 1000 ms"), std::string::npos) << said;
}

}  // namespace
}  // namespace weft
