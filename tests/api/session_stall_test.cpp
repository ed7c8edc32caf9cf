// The stall watchdog of a Session in one process (scheduler/stall_watchdog.h): a step stuck in a
// kernel is reported past its stall warning, ended as DeadlineExceeded past its stall timeout, and
// when the kernel never returns the process ends with the report instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "weft/weft.h"
#include "cluster_mpi/test_sleep_op.h"
#include "scheduler/stall_watchdog.h"

namespace weft {
namespace {

struct SleepGraph {
  Graph g;
  Tensor ms, out;
};

// `branches` TestSleeps side by side. (Too small for the executor to run them in parallel: the
// step runs node by node on the caller's thread; tests/scheduler/stall_watchdog_test.cpp runs
// the ready-queue path.)
SleepGraph sleep_graph(int branches) {
  testing::register_test_sleep();
  SleepGraph s;
  GraphScope scope(s.g);
  s.ms = placeholder(float32, {1}, "ms");
  s.out = testing::test_sleep(s.ms) * 2.f;
  for (int b = 1; b < branches; ++b) s.out = s.out + testing::test_sleep(s.ms + 0.f);
  return s;
}

Tensor millis(float ms) { return constant(std::vector<float>{ms}, Shape{1}); }

void expect_ended_then_working(int branches) {
  SleepGraph s = sleep_graph(branches);
  Session sess(s.g, {.stall_warning_ms = 300, .stall_timeout_ms = 900});
  // out = 2 ms + ms per further branch.
  const auto expected = [&](float ms) { return ms * static_cast<float>(branches + 1); };
  EXPECT_EQ(sess.run({{s.ms, millis(1.f)}}, {s.out})[0].to_vector<float>()[0], expected(1.f));
  ::testing::internal::CaptureStderr();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)sess.run({{s.ms, millis(2000.f)}}, {s.out});
    ADD_FAILURE() << "a step stalled past its stall timeout was not ended";
  } catch (const DeadlineExceeded& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[Session] the step stalled"), std::string::npos) << what;
    EXPECT_NE(what.find("running"), std::string::npos) << what;
    EXPECT_NE(what.find("(test_sleep) created at"), std::string::npos) << what;
    EXPECT_NE(what.find("session_stall_test.cpp"), std::string::npos) << what;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  // A synchronous kernel cannot be interrupted: the step ends once it returns, not at 2 x 2 s.
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 3.9) << "the step ran on after its stall timeout";
  EXPECT_NE(printed.find("weft: [Session] "), std::string::npos) << printed;
  EXPECT_NE(printed.find("stalls: what it runs and waits for"), std::string::npos) << printed;
  EXPECT_NE(printed.find("(stall warning 0.3 s; it is ended at 0.9 s)"), std::string::npos) << printed;
  // The next step works.
  EXPECT_EQ(sess.run({{s.ms, millis(3.f)}}, {s.out})[0].to_vector<float>()[0], expected(3.f));
}

TEST(SessionStall, AChainStalledInAKernelIsReportedEndedAndTheNextStepWorks) { expect_ended_then_working(1); }

TEST(SessionStall, AStepOfTwoBranchesStalledInAKernelIsEndedBeforeTheSecond) { expect_ended_then_working(2); }

TEST(SessionStall, NoLimitsNoReport) {
  SleepGraph s = sleep_graph(1);
  Session sess(s.g, {.stall_warning_ms = 0, .stall_timeout_ms = 0});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(sess.run({{s.ms, millis(400.f)}}, {s.out})[0].to_vector<float>()[0], 800.f);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(SessionStall, TheLimitsComeFromTheEnvironmentByDefault) {
  // Read once per process; this binary sets neither variable.
  EXPECT_EQ(SessionOptions{}.stall_warning_ms, default_stall_warning().count());
  EXPECT_EQ(SessionOptions{}.stall_timeout_ms, default_stall_timeout().count());
}

// A kernel that never returns: the step cannot end, so the process ends with the report (status
// 124) once the reclaim grace is over, instead of hanging.
TEST(SessionStallDeathTest, AKernelThatNeverReturnsEndsTheProcessWithTheReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child runs afresh, reading the variable below
  setenv("WEFT_STALL_RECLAIM_MS", "500", 1);
  EXPECT_EXIT(
      {
        SleepGraph s = sleep_graph(1);
        Session sess(s.g, {.stall_warning_ms = 200, .stall_timeout_ms = 400});
        (void)sess.run({{s.ms, millis(600000.f)}}, {s.out});
      },
      ::testing::ExitedWithCode(kUnreclaimableExitStatus),
      "cannot be reclaimed, so the process ends instead of hanging(.|\n)*running [0-9.]+ s: node .*\\(test_sleep\\) created at");
  unsetenv("WEFT_STALL_RECLAIM_MS");
}

}  // namespace
}  // namespace weft
