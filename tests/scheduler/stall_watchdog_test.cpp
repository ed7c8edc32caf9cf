// The stall watchdog over the executor's two ways of running a step (scheduler/stall_watchdog.h):
// node by node on the caller's thread, and the ready queue of Executor::run_together.
#include "scheduler/stall_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>

#include "api/ops/creation.h"
#include "cluster_mpi/test_sleep_op.h"
#include "graph_test_util.h"

namespace weft {
namespace {

using testing::add;
using testing::placeholder;

struct Sleeps {
  std::shared_ptr<const GraphIR> graph;
  int32_t ms = -1, out = -1;
};

// Two TestSleeps side by side, added up.
Sleeps two_sleeps() {
  testing::register_test_sleep();
  auto g = std::make_shared<GraphIR>();
  Sleeps s;
  s.ms = placeholder(*g, float32, {1}, "ms");
  const int32_t a = add(*g, "TestSleep", {{s.ms, 0}}, {}, "sleep_a");
  const int32_t b = add(*g, "TestSleep", {{s.ms, 0}}, {}, "sleep_b");
  s.out = add(*g, "Add", {{a, 0}, {b, 0}});
  s.graph = g;
  return s;
}

// The sleeps a stall report names as running.
int running_sleeps(const std::string& what) {
  int n = 0;
  for (size_t at = what.find("(test_sleep)"); at != std::string::npos; at = what.find("(test_sleep)", at + 1)) ++n;
  return n;
}

// Runs a stalled step under `parallelism`; what it was ended with, and in `started` how many
// sleeps began during the step.
std::string stalled_step(Parallelism parallelism, int* started) {
  const Sleeps s = two_sleeps();
  Executor exec(s.graph, {.feeds = {{s.ms, 0}}, .fetches = {{s.out, 0}}}, parallelism);
  const std::vector<Tensor> ms{weft::constant(std::vector<float>{1500.f}, Shape{1})};
  const StepOptions watched{.stall_warning = std::chrono::milliseconds(200),
                            .stall_timeout = std::chrono::milliseconds(500),
                            .owner = "test"};
  const int before = testing::test_sleep_starts();
  std::string what;
  try {
    (void)exec.run_checked_feeds(ms, watched);
    ADD_FAILURE() << "the stalled step was not ended";
  } catch (const DeadlineExceeded& e) {
    what = e.what();
  }
  *started = testing::test_sleep_starts() - before;
  // The next step, with nothing to wait for, works.
  const std::vector<Tensor> short_ms{weft::constant(std::vector<float>{2.f}, Shape{1})};
  EXPECT_EQ(exec.run_checked_feeds(short_ms, watched)[0].to_vector<float>(), (std::vector<float>{4.f}));
  return what;
}

TEST(StallWatchdog, EndsAStepRunOnTheReadyQueue) {
  int started = 0;
  ::testing::internal::CaptureStderr();
  const std::string what = stalled_step(Parallelism::kParallel, &started);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(what.find("[test] the step stalled: it ran past its stall timeout of 500 ms"), std::string::npos) << what;
  EXPECT_NE(what.find("running"), std::string::npos) << what;
  EXPECT_NE(what.find("(test_sleep)"), std::string::npos) << what;
  EXPECT_NE(printed.find("weft: [test] a step stalls: what it runs and waits for"), std::string::npos) << printed;
  // Each sleep returns by itself (1.5 s); the step ends then: every sleep that ran was running
  // when the stall was reported, and none started after it (with one free worker, the second
  // sleep would start once the first returned). Counted, not timed: a loaded machine stretches
  // the times, not the counts.
  EXPECT_GE(started, 1);
  EXPECT_EQ(started, running_sleeps(what)) << what;
}

TEST(StallWatchdog, EndsAStepRunNodeByNodeBeforeItsNextNode) {
  int started = 0;
  ::testing::internal::CaptureStderr();
  const std::string what = stalled_step(Parallelism::kSequential, &started);
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_NE(what.find("node 'sleep_a' (test_sleep)"), std::string::npos) << what;
  EXPECT_EQ(what.find("sleep_b"), std::string::npos) << what;
  EXPECT_EQ(started, 1) << "sleep_b must never start";
}

TEST(StallWatchdog, AWatchThatEndsInTimeReportsNothing) {
  const Sleeps s = two_sleeps();
  Executor exec(s.graph, {.feeds = {{s.ms, 0}}, .fetches = {{s.out, 0}}}, Parallelism::kSequential);
  const std::vector<Tensor> ms{weft::constant(std::vector<float>{5.f}, Shape{1})};
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(exec.run_checked_feeds(ms, {.stall_warning = std::chrono::milliseconds(1000), .owner = "test"})[0]
                  .to_vector<float>(),
              (std::vector<float>{10.f}));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(StallWatchdog, TheReportSaysTheLimits) {
  EXPECT_EQ(stall_report_heading(7, std::chrono::milliseconds(61200), {std::chrono::milliseconds(60000), std::chrono::milliseconds(600000)}),
            "step 7 stalls: what it runs and waits for 61.2 s in (stall warning 60.0 s; it is ended at 600.0 s):\n");
  EXPECT_EQ(stall_report_heading(0, std::chrono::milliseconds(500), {std::chrono::milliseconds(0), std::chrono::milliseconds(400)}),
            "a step stalls: what it runs and waits for 0.5 s in (no stall warning; it is ended at 0.4 s):\n");
}

}  // namespace
}  // namespace weft
