// A collective instance gathered from the process's members of its group before NCCL sees it
// (comm/nccl/nccl_gathered_launch.h), on the CPU: the parts in member order whatever order they
// come in, every member's done exactly once (complete, fail, or at once for a member that comes
// after a failure), and the two ways a gathering launch fails through the real watchdog: a
// cancelled step of a member that came, and members still missing past the deadline, named.
// The NCCL code on top of it is tests/gpu/nccl_test.cpp's (NcclLocalMembers, two GPUs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_gathered_launch.h"
#include "runtime/cancellation.h"
#include "runtime/error.h"

namespace weft {
namespace {

using namespace std::chrono_literals;
// Parts are strings; the launch's NCCL side (its completion event) is always done.
struct Launch final : NcclGatheredLaunch<std::string> {
  using NcclGatheredLaunch::NcclGatheredLaunch;
  NcclPoll poll_completion() override { return NcclPoll::ready(); }
  void finish_launch() override {}
};
using Arrived = Launch::Arrived;

std::string message_of(std::exception_ptr e) {
  if (!e) return "ok";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A communicator that is up; aborting it counts.
class ReadyChannel final : public NcclChannel {
 public:
  NcclPoll poll_comm() override { return NcclPoll::ready(); }
  void open() override {}
  void abort(std::exception_ptr) override { ++aborts; }
  std::exception_ptr error(const std::string& why) const override {
    return std::make_exception_ptr(Unavailable("[test] group: " + why));
  }
  int aborts = 0;
};

// The launch's done calls, per member, in the order they ran.
struct Calls {
  std::vector<std::pair<int, std::string>> log;
  Launch::Done done_of(int member) {
    return [this, member](std::exception_ptr e) { log.emplace_back(member, message_of(e)); };
  }
};

struct Harness {
  Harness()
      : dog(60s, [this](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) { dog.abort({c}, e); }, {},
            NcclWatchdog::Thread::kNone) {}
  std::shared_ptr<Launch> launch(std::vector<int> members, std::chrono::steady_clock::duration wait = 60s) {
    auto l = std::make_shared<Launch>(channel, std::move(members), "[test] group 7 step 3 instance 0",
                                      std::chrono::steady_clock::now() + wait);
    dog.watch(l);
    return l;
  }
  Launch::Arrival arrival(int member, CancellationManager* cm = nullptr) {
    return {.member = member, .cancellation = cm, .part = "part of " + std::to_string(member), .done = calls.done_of(member)};
  }
  std::shared_ptr<ReadyChannel> channel = std::make_shared<ReadyChannel>();
  Calls calls;
  NcclWatchdog dog;
};

TEST(NcclGatheredLaunch, IsIssuableOnceEveryMemberCameWithThePartsInMemberOrder) {
  Harness h;
  auto l = h.launch({0, 2, 5});
  EXPECT_EQ(l->arrive(h.arrival(5)), Arrived::kWaiting);
  EXPECT_EQ(l->arrive(h.arrival(0)), Arrived::kWaiting);
  EXPECT_FALSE(l->all_arrived());
  EXPECT_EQ(l->arrive(h.arrival(2)), Arrived::kGathered);
  EXPECT_TRUE(l->all_arrived());
  ASSERT_EQ(l->size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(l->part(i), "part of " + std::to_string(l->member(i)));
  EXPECT_EQ(l->member(1), 2);
  EXPECT_TRUE(h.calls.log.empty());  // nothing runs before the launch completes
  l->complete();
  l->complete();  // a second settle does nothing
  l->fail(std::make_exception_ptr(Internal("late")));
  EXPECT_EQ(h.calls.log, (std::vector<std::pair<int, std::string>>{{0, "ok"}, {2, "ok"}, {5, "ok"}}));
}

TEST(NcclGatheredLaunch, OneMemberIsIssuableAsItComes) {
  Harness h;
  auto l = h.launch({3});
  EXPECT_EQ(l->arrive(h.arrival(3)), Arrived::kGathered);
  EXPECT_EQ(l->part(0), "part of 3");
}

TEST(NcclGatheredLaunch, AMemberThatCameTwiceOrIsNotLocalIsInvalidArgumentAndLeavesTheLaunchAsItWas) {
  Harness h;
  auto l = h.launch({0, 1});
  EXPECT_EQ(l->arrive(h.arrival(1)), Arrived::kWaiting);
  try {
    l->arrive(h.arrival(1));
    ADD_FAILURE() << "a member came twice";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "[test] group 7 step 3 instance 0: member 1 came twice")) << e.what();
  }
  try {
    l->arrive(h.arrival(4));
    ADD_FAILURE() << "a member of another process came";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "member 4 is not one of this process's members (0, 1)")) << e.what();
  }
  EXPECT_TRUE(h.calls.log.empty());  // the refused arrivals' done is their caller's
  EXPECT_EQ(l->arrive(h.arrival(0)), Arrived::kGathered);
}

// A member's step is cancelled while the instance gathers: the watchdog fails it (and aborts the
// communicators, as for any failure), the member that came gets its step's error, and the one
// that comes later gets it at once.
TEST(NcclGatheredLaunch, ACancelledStepFailsTheGatheringInstanceAndLaterArrivalsAtOnce) {
  Harness h;
  auto l = h.launch({0, 1});
  CancellationManager step0, step1;
  EXPECT_EQ(l->arrive(h.arrival(0, &step0)), Arrived::kWaiting);
  h.dog.poll_once();
  EXPECT_TRUE(h.calls.log.empty());
  step0.cancel(std::make_exception_ptr(Unavailable("[step] task 2 was lost")));
  h.dog.poll_once();
  EXPECT_EQ(h.channel->aborts, 1);
  ASSERT_EQ(h.calls.log.size(), 1u);
  EXPECT_EQ(h.calls.log[0], std::make_pair(0, std::string("[step] task 2 was lost")));
  EXPECT_EQ(l->arrive(h.arrival(1, &step1)), Arrived::kRefused);
  EXPECT_TRUE(l->all_arrived());
  ASSERT_EQ(h.calls.log.size(), 2u);
  EXPECT_EQ(h.calls.log[1], std::make_pair(1, std::string("[step] task 2 was lost")));
  EXPECT_EQ(h.dog.launches(), 0u);
}

// A member of this process that never runs its node: past the wait, the instance fails naming it.
TEST(NcclGatheredLaunch, MembersMissingPastTheDeadlineAreNamed) {
  Harness h;
  auto l = h.launch({0, 1, 2}, 20ms);
  EXPECT_EQ(l->arrive(h.arrival(1)), Arrived::kWaiting);
  h.dog.poll_once();
  EXPECT_TRUE(h.calls.log.empty());
  std::this_thread::sleep_for(30ms);
  h.dog.poll_once();
  ASSERT_EQ(h.calls.log.size(), 1u);
  EXPECT_EQ(h.calls.log[0].first, 1);
  EXPECT_TRUE(contains(h.calls.log[0].second, "[test] group 7 step 3 instance 0: member(s) 0, 2 of this process did "
                                              "not run their collective node"))
      << h.calls.log[0].second;
  EXPECT_EQ(h.channel->aborts, 1);
}

// A gathered instance is past its deadline's reach: only the launch itself can fail it.
TEST(NcclGatheredLaunch, AGatheredInstanceHasNoDeadline) {
  Harness h;
  auto l = h.launch({0}, 1ms);
  EXPECT_EQ(l->arrive(h.arrival(0)), Arrived::kGathered);
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(l->cancelled(), nullptr);
}

// A failure gives each member its own step's error where that step was cancelled, else the
// failure's.
TEST(NcclGatheredLaunch, AFailureGivesEachMemberItsOwnStepsErrorWhereItWasCancelled) {
  Harness h;
  auto l = h.launch({0, 1});
  CancellationManager step0, step1;
  l->arrive(h.arrival(0, &step0));
  l->arrive(h.arrival(1, &step1));
  step1.cancel(std::make_exception_ptr(Unavailable("[step] member 1's step was cancelled")));
  l->fail(std::make_exception_ptr(Unavailable("[test] NCCL error")));
  EXPECT_EQ(h.calls.log, (std::vector<std::pair<int, std::string>>{{0, "[test] NCCL error"},
                                                                   {1, "[step] member 1's step was cancelled"}}));
}

// Members arriving on their own threads while the watchdog looks and a step is cancelled: every
// member's done runs exactly once, whichever wins.
TEST(NcclGatheredLaunch, ConcurrentArrivalsLooksAndACancelRunEveryDoneOnce) {
  constexpr int kMembers = 4;
  for (int round = 0; round < 200; ++round) {
    NcclWatchdog dog(60s, [&](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) { dog.abort({c}, e); }, {},
                     NcclWatchdog::Thread::kNone);
    auto channel = std::make_shared<ReadyChannel>();
    auto l = std::make_shared<Launch>(channel, std::vector<int>{0, 1, 2, 3}, "[test] round",
                                      std::chrono::steady_clock::now() + 60s);
    dog.watch(l);
    std::atomic<int> calls[kMembers] = {};
    CancellationManager step;
    std::atomic<int> gathered{0};
    std::vector<std::thread> threads;
    for (int m = 0; m < kMembers; ++m)
      threads.emplace_back([&, m] {
        const Arrived a = l->arrive(
            {.member = m, .cancellation = &step, .part = "x", .done = [&calls, m](std::exception_ptr) { ++calls[m]; }});
        if (a == Arrived::kGathered) ++gathered;
      });
    threads.emplace_back([&] {
      if (round % 2) step.cancel(std::make_exception_ptr(Unavailable("[step] cancelled")));
      for (int i = 0; i < 3; ++i) dog.poll_once();
    });
    for (std::thread& t : threads) t.join();
    if (gathered == 1) l->complete();  // the issuer's part: completes, or finds it failed already
    for (int m = 0; m < kMembers; ++m) ASSERT_EQ(calls[m].load(), 1) << "round " << round << " member " << m;
    EXPECT_TRUE(l->all_arrived());
  }
}

}  // namespace
}  // namespace weft
