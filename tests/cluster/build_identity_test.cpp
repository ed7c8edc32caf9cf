// One weft in a job (cluster/build_identity.h): the identity is stable, the registry's fingerprint
// follows its ops (not their order), and a mismatch names both builds.
#include <gtest/gtest.h>

#include "cluster/build_identity.h"
#include "runtime/op_registry.h"

namespace weft {
namespace {

TEST(BuildIdentity, IsTheSameOnEveryCall) {
  const BuildIdentity a = this_build(), b = this_build();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.build.size(), 16u);
  EXPECT_EQ(a.registry.size(), 16u);
  EXPECT_FALSE(a.version.empty());
  EXPECT_EQ(build_mismatch("task 1", a, "the chief", b), "");
}

TEST(BuildIdentity, TheRegistryFingerprintFollowsItsOpsNotTheirOrder) {
  OpRegistry one, two;
  one.add({.name = "A", .min_inputs = 1, .max_inputs = 1});
  one.add({.name = "B", .min_inputs = 2, .max_inputs = 2});
  two.add({.name = "B", .min_inputs = 2, .max_inputs = 2});
  two.add({.name = "A", .min_inputs = 1, .max_inputs = 1});
  EXPECT_EQ(one.fingerprint(), two.fingerprint());
  OpRegistry other_inputs;
  other_inputs.add({.name = "A", .min_inputs = 1, .max_inputs = 2});
  other_inputs.add({.name = "B", .min_inputs = 2, .max_inputs = 2});
  EXPECT_NE(one.fingerprint(), other_inputs.fingerprint());
  two.add({.name = "C"});
  EXPECT_NE(one.fingerprint(), two.fingerprint());
}

TEST(BuildIdentity, AMismatchNamesBothBuildsAndWhatDiffers) {
  const BuildIdentity chief{"0.1.0", "00000000000000aa", "00000000000000bb"};
  BuildIdentity task = chief;
  task.build = "00000000000000cc";
  const std::string why = build_mismatch("/job:worker/replica:0/task:1", task, "the chief", chief);
  EXPECT_NE(why.find("another build of weft"), std::string::npos) << why;
  EXPECT_NE(why.find("00000000000000aa"), std::string::npos) << why;
  EXPECT_NE(why.find("00000000000000cc"), std::string::npos) << why;
  EXPECT_NE(why.find("/job:worker/replica:0/task:1"), std::string::npos) << why;
  task = chief;
  task.version = "0.2.0";
  EXPECT_NE(build_mismatch("t", task, "the chief", chief).find("another version of weft"), std::string::npos);
  task = chief;
  task.registry = "00000000000000dd";
  EXPECT_NE(build_mismatch("t", task, "the chief", chief).find("other ops registered"), std::string::npos);
}

}  // namespace
}  // namespace weft
