// Stop signals for a job (cluster/job_signals.h): the control messages that carry them, and a
// process's own handling, each case in a fresh child process (signals and the handlers are the
// process's). The children run only under their parent test, which sets kChild.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cluster/job_signals.h"
#include "cluster/messages.h"
#include "runtime/error.h"
#include "test_child_process.h"

namespace weft {
namespace {

std::vector<capnp::word> words_of(capnp::MessageBuilder& message) {
  const kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  return std::vector<capnp::word>(flat.begin(), flat.end());
}

std::vector<capnp::word> signal_reply(int signo) {
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<proto::Reply>();
  r.setKind(proto::Reply::Kind::SIGNAL);
  r.setSignal(signo);
  return words_of(message);
}

std::vector<capnp::word> end_job_request(int signo) {
  capnp::MallocMessageBuilder message;
  message.initRoot<proto::Request>().setEndJob(signo);
  return words_of(message);
}

TEST(JobSignalMessages, ATasksSignalAndTheChiefsEndJobDecode) {
  const ControlReply reply = decode_reply(signal_reply(SIGTERM), "/job:worker/task:2");
  EXPECT_EQ(reply.kind, proto::Reply::Kind::SIGNAL);
  EXPECT_EQ(reply.signal, SIGTERM);
  const ControlRequest request = decode_request(end_job_request(SIGINT), "the chief");
  EXPECT_EQ(request.kind, ControlRequest::Kind::kEndJob);
  EXPECT_EQ(request.signal, SIGINT);
}

TEST(JobSignalMessages, OnlyStopSignalsAreAccepted) {
  try {
    (void)decode_reply(signal_reply(SIGKILL), "/job:worker/task:2");
    FAIL() << "a task's SIGKILL was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("/job:worker/task:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not SIGTERM or SIGINT"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)decode_request(end_job_request(0), "the chief"), InvalidArgument);
}

constexpr const char* kChild = "WEFT_JOB_SIGNALS_TEST_CHILD";

// Waits (bounded) for the watcher thread to mark the process preempted.
std::optional<job_signals::Preempted> wait_preempted() {
  for (int i = 0; i < 1000; ++i) {
    if (auto p = job_signals::preempted()) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

TEST(JobSignalsChild, AHeldSignalMarksTheProcessPreempted) {
  if (!std::getenv(kChild)) GTEST_SKIP() << "run by JobSignals.AHeldSignalMarksTheProcessPreempted";
  job_signals::hold(std::chrono::seconds(60));
  EXPECT_THROW(job_signals::hold(std::chrono::seconds(60)), FailedPrecondition);  // one per process
  EXPECT_FALSE(job_signals::preempted());
  raise(SIGTERM);
  const auto p = wait_preempted();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->signo, SIGTERM);
  EXPECT_FALSE(p->task.empty());
  job_signals::finish();
}

TEST(JobSignalsChild, WaitsPastTheGracePeriod) {
  if (!std::getenv(kChild)) GTEST_SKIP() << "run by JobSignals.NoStepBoundaryWithinTheGracePeriodEndsTheProcess";
  job_signals::hold(std::chrono::milliseconds(200));
  raise(SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(60));  // never a step boundary
}

TEST(JobSignalsChild, GetsASecondSignal) {
  if (!std::getenv(kChild)) GTEST_SKIP() << "run by JobSignals.ASecondSignalEndsTheProcessAtOnce";
  job_signals::hold(std::chrono::seconds(60));
  raise(SIGTERM);
  ASSERT_TRUE(wait_preempted());
  raise(SIGINT);
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

TEST(JobSignalsChild, GetsASignalAfterTheHold) {
  if (!std::getenv(kChild)) GTEST_SKIP() << "run by JobSignals.WithoutAHoldASignalHasItsDefaultAction";
  job_signals::hold(std::chrono::seconds(60));
  job_signals::release();
  raise(SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

std::string child(const std::string& test) {
  const pid_t pid = testing::spawn_test_child("JobSignalsChild." + test, {std::string(kChild) + "=1"});
  return testing::wait_test_child(pid, std::chrono::seconds(30));
}

TEST(JobSignals, AHeldSignalMarksTheProcessPreempted) { EXPECT_EQ(child("AHeldSignalMarksTheProcessPreempted"), ""); }

TEST(JobSignals, NoStepBoundaryWithinTheGracePeriodEndsTheProcess) {
  EXPECT_EQ(child("WaitsPastTheGracePeriod"), "killed by signal " + std::to_string(SIGTERM));
}

TEST(JobSignals, ASecondSignalEndsTheProcessAtOnce) {
  EXPECT_EQ(child("GetsASecondSignal"), "killed by signal " + std::to_string(SIGINT));
}

TEST(JobSignals, WithoutAHoldASignalHasItsDefaultAction) {
  EXPECT_EQ(child("GetsASignalAfterTheHold"), "killed by signal " + std::to_string(SIGTERM));
}

}  // namespace
}  // namespace weft
