// The NCCL watchdog's state machine (comm/nccl/nccl_watchdog.h) on the CPU: stand-in channels and
// launches answer its questions as a communicator and a CUDA event would, so every path — a
// communicator coming up, timing out or failing; a launch completing, finishing after
// ncclInProgress, failing on the GPU or in a cancelled step; aborts and their zombies — runs
// without a GPU. The real NCCL users are tests/gpu/nccl_test.cpp and tests/gpu/nccl_p2p_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_watchdog.h"
#include "runtime/error.h"

namespace weft {
namespace {

using namespace std::chrono_literals;

std::string message_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Everything here may be read and changed by the watchdog's thread and the test at once.
class FakeChannel final : public NcclChannel {
 public:
  explicit FakeChannel(std::string name) : name_(std::move(name)) {}
  void set_comm(NcclPoll p) {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = std::move(p);
  }
  int opens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opens_;
  }
  int aborts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_;
  }

  NcclPoll poll_comm() override {
    std::lock_guard<std::mutex> lock(mu_);
    return comm_;
  }
  void open() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++opens_;
  }
  // Runs inside abort(), as ncclCommAbort would.
  void set_on_abort(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mu_);
    on_abort_ = std::move(f);
  }
  void abort(std::exception_ptr) override {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++aborts_;
      f = on_abort_;
    }
    if (f) f();
  }
  std::exception_ptr error(const std::string& why) const override {
    return std::make_exception_ptr(Unavailable("[test] " + name_ + ": " + why));
  }

 private:
  const std::string name_;
  mutable std::mutex mu_;
  NcclPoll comm_ = NcclPoll::pending();
  int opens_ = 0;
  int aborts_ = 0;
  std::function<void()> on_abort_;
};

class FakeLaunch final : public NcclLaunch {
 public:
  explicit FakeLaunch(std::shared_ptr<NcclChannel> c) : NcclLaunch(std::move(c)) {}
  void set_completion(NcclPoll p) {
    std::lock_guard<std::mutex> lock(mu_);
    completion_ = std::move(p);
  }
  void set_cancelled(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = e;
  }
  void make_finish_throw() {
    std::lock_guard<std::mutex> lock(mu_);
    finish_throws_ = true;
  }
  int finishes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finishes_;
  }
  int completes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return completes_;
  }
  std::vector<std::string> fails() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fails_;
  }
  int waits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }
  int abandons() const {
    std::lock_guard<std::mutex> lock(mu_);
    return abandons_;
  }
  void make_abandon_throw() {
    std::lock_guard<std::mutex> lock(mu_);
    abandon_throws_ = true;
  }
  // Blocks until complete() or fail() ran, at most `limit`.
  bool wait_ended(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return completes_ + fails_.size() > 0; });
  }

  NcclPoll poll_completion() override {
    std::lock_guard<std::mutex> lock(mu_);
    return completion_;
  }
  void finish_launch() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_throws_) throw Internal("[test] cudaEventRecord failed");
    ++finishes_;
  }
  std::exception_ptr cancelled() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  void complete() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++completes_;
    cv_.notify_all();
  }
  void fail(std::exception_ptr e) override {
    std::lock_guard<std::mutex> lock(mu_);
    fails_.push_back(message_of(e));
    cv_.notify_all();
  }
  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++waits_;
  }
  void abandoned() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (abandon_throws_) throw Internal("[test] cudaEventRecord failed");
    ++abandons_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  NcclPoll completion_ = NcclPoll::pending();
  std::exception_ptr cancelled_;
  bool finish_throws_ = false;
  int finishes_ = 0;
  int completes_ = 0;
  int waits_ = 0;
  int abandons_ = 0;
  bool abandon_throws_ = false;
  std::vector<std::string> fails_;
};

// A watchdog looked at by hand (no thread), whose failure handler records what it got and aborts
// the channel, as the collectives' does.
struct Harness {
  explicit Harness(std::chrono::milliseconds timeout = 60s)
      : dog(timeout,
            [this](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) {
              failures.push_back(message_of(e));
              dog.abort({c}, e);
            },
            {}, NcclWatchdog::Thread::kNone) {}
  std::shared_ptr<FakeChannel> ready_channel(const std::string& name) {
    auto c = std::make_shared<FakeChannel>(name);
    dog.watch(c);
    c->set_comm(NcclPoll::ready());
    dog.poll_once();
    return c;
  }
  std::shared_ptr<FakeLaunch> launch_on(const std::shared_ptr<NcclChannel>& c) {
    auto l = std::make_shared<FakeLaunch>(c);
    dog.watch(l);
    return l;
  }
  std::vector<std::string> failures;
  NcclWatchdog dog;
};

TEST(NcclWatchdog, AChannelOpensOnceWhenItsCommunicatorIsReady) {
  Harness h;
  auto c = std::make_shared<FakeChannel>("link A");
  h.dog.watch(c);
  EXPECT_EQ(h.dog.poll_once(), NcclWatchdog::Naps{}.waiting);  // coming up
  EXPECT_EQ(c->opens(), 0);
  c->set_comm(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(c->opens(), 1);
  EXPECT_EQ(h.dog.poll_once(), std::nullopt);  // nothing pending: idle
  EXPECT_EQ(c->opens(), 1);
  EXPECT_TRUE(h.failures.empty());
}

TEST(NcclWatchdog, AChannelNotUpByItsDeadlineFailsNamingTheWait) {
  Harness h(20ms);
  auto c = std::make_shared<FakeChannel>("link A");
  h.dog.watch(c);
  auto l = h.launch_on(c);
  h.dog.poll_once();
  EXPECT_TRUE(h.failures.empty());
  std::this_thread::sleep_for(30ms);
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "[test] link A: a rank did not join within 20 ms")) << h.failures[0];
  EXPECT_EQ(c->aborts(), 1);
  ASSERT_EQ(l->fails().size(), 1u);  // what waited for it fails with it
  EXPECT_EQ(l->fails()[0], h.failures[0]);
  EXPECT_EQ(h.dog.abort_reason(*c), h.failures[0]);
  EXPECT_TRUE(h.dog.live_channels().empty());
}

TEST(NcclWatchdog, ACommunicatorThatFailsToComeUpFailsWithNcclsWords) {
  Harness h;
  auto c = std::make_shared<FakeChannel>("group 7");
  h.dog.watch(c);
  c->set_comm(NcclPoll::failed("unhandled system error"));
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "group 7: creating its communicator failed: unhandled system error"))
      << h.failures[0];
  EXPECT_EQ(c->opens(), 0);
}

TEST(NcclWatchdog, ALaunchCompletesOnceWhenItsEventFires) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  EXPECT_EQ(h.dog.poll_once(), NcclWatchdog::Naps{}.waiting);  // queued: not the watchdog's to look at
  EXPECT_TRUE(h.dog.launched(*l, /*in_progress=*/false));
  EXPECT_EQ(l->finishes(), 1);
  EXPECT_EQ(h.dog.poll_once(), NcclWatchdog::Naps{}.in_flight);
  EXPECT_EQ(l->completes(), 0);
  l->set_completion(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(l->completes(), 1);
  EXPECT_EQ(h.dog.launches(), 0u);
  EXPECT_EQ(h.dog.poll_once(), std::nullopt);
  EXPECT_EQ(l->completes(), 1);
  EXPECT_TRUE(l->fails().empty());
}

TEST(NcclWatchdog, ALaunchInProgressIsFinishedAndTheChannelReopenedWhenNcclIsDone) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  c->set_comm(NcclPoll::pending());  // ncclInProgress: the communicator takes no other call
  EXPECT_FALSE(h.dog.launched(*l, /*in_progress=*/true));
  EXPECT_EQ(l->finishes(), 0);
  h.dog.poll_once();
  EXPECT_EQ(l->finishes(), 0);
  EXPECT_EQ(c->opens(), 1);  // only the first opening
  c->set_comm(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(l->finishes(), 1);
  EXPECT_EQ(c->opens(), 2);  // the next launch may go
  EXPECT_EQ(l->completes(), 0);  // its event has not fired
  l->set_completion(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(l->completes(), 1);
}

TEST(NcclWatchdog, AFinishThatThrowsFailsTheChannel) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  h.dog.launched(*l, true);
  l->make_finish_throw();
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "cudaEventRecord failed")) << h.failures[0];
  ASSERT_EQ(l->fails().size(), 1u);
  EXPECT_EQ(l->completes(), 0);
}

TEST(NcclWatchdog, ANcclErrorFailsEveryLaunchOfItsChannelOnceAndKeepsThoseOnTheGpuAsZombies) {
  Harness h;
  auto a = h.ready_channel("link A");
  auto b = h.ready_channel("link B");
  auto queued = h.launch_on(a);
  auto flying = h.launch_on(a);
  auto other = h.launch_on(b);
  h.dog.launched(*flying, false);
  h.dog.launched(*other, false);
  h.dog.poll_once();
  a->set_comm(NcclPoll::failed("remote process exited or there was a network error"));
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "[test] link A: NCCL error: remote process exited")) << h.failures[0];
  EXPECT_EQ(a->aborts(), 1);
  EXPECT_EQ(queued->fails(), std::vector<std::string>{h.failures[0]});
  EXPECT_EQ(flying->fails(), std::vector<std::string>{h.failures[0]});
  EXPECT_TRUE(other->fails().empty());
  EXPECT_EQ(h.dog.zombies(), 1u);  // `flying` may still be running on the GPU
  EXPECT_EQ(h.dog.launches(), 1u);

  flying->set_completion(NcclPoll::ready());  // the abort made its kernel return
  other->set_completion(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(h.dog.zombies(), 0u);
  EXPECT_EQ(flying->completes(), 0);  // failed, never completed
  EXPECT_EQ(other->completes(), 1);
  EXPECT_EQ(b->aborts(), 0);
  EXPECT_EQ(h.failures.size(), 1u);
}

TEST(NcclWatchdog, AGpuErrorWhileWaitingFailsTheChannel) {
  Harness h;
  auto c = h.ready_channel("group 3");
  auto l = h.launch_on(c);
  h.dog.launched(*l, false);
  l->set_completion(NcclPoll::failed("an illegal memory access was encountered"));
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "waiting for its work on the GPU failed: an illegal memory access")) << h.failures[0];
  h.dog.poll_once();
  EXPECT_EQ(h.dog.zombies(), 0u);  // its event said failed, not pending: nothing more to keep
}

TEST(NcclWatchdog, ACancelledStepFailsItsLaunchEvenWhileQueued) {
  Harness h;
  auto c = h.ready_channel("group 3");
  auto l = h.launch_on(c);
  l->set_cancelled(std::make_exception_ptr(Unavailable("[step 12] cancelled: a peer failed")));
  h.dog.poll_once();
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_TRUE(contains(h.failures[0], "[step 12] cancelled")) << h.failures[0];
  EXPECT_EQ(l->fails().size(), 1u);
  EXPECT_EQ(h.dog.zombies(), 0u);  // never launched
}

TEST(NcclWatchdog, AbortingTwiceFailsOnceAndTheReasonStays) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  EXPECT_EQ(h.dog.abort_reason(*c), std::nullopt);
  h.dog.abort({c}, std::make_exception_ptr(FailedPrecondition("[test] first")));
  h.dog.abort({c}, std::make_exception_ptr(FailedPrecondition("[test] second")));
  EXPECT_EQ(c->aborts(), 1);
  EXPECT_EQ(l->fails(), std::vector<std::string>{"[test] first"});
  EXPECT_EQ(h.dog.abort_reason(*c), "[test] first");
  EXPECT_TRUE(h.dog.live_channels().empty());
  EXPECT_EQ(h.dog.launches(), 0u);
}

TEST(NcclWatchdog, AForgottenLaunchIsNeitherFailedNorWatched) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  EXPECT_TRUE(h.dog.forget(l));
  EXPECT_EQ(h.dog.launches(), 0u);
  h.dog.abort({c}, std::make_exception_ptr(FailedPrecondition("[test] gone")));
  EXPECT_TRUE(l->fails().empty());
  EXPECT_EQ(h.dog.poll_once(), std::nullopt);
}

// An abort that got there first failed the launch: forget() says so, and the caller leaves it be.
TEST(NcclWatchdog, ForgettingALaunchAnAbortFailedSaysSo) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  h.dog.abort({c}, std::make_exception_ptr(FailedPrecondition("[test] gone")));
  EXPECT_EQ(l->fails().size(), 1u);
  EXPECT_FALSE(h.dog.forget(l));
  EXPECT_EQ(l->fails().size(), 1u);
}

// A channel whose queued launch was cancelled before the channel was watched (the collectives
// watch a group's communicators only once its first instance has gathered) stays aborted.
TEST(NcclWatchdog, WatchingAChannelAlreadyAbortedLeavesItAborted) {
  Harness h;
  auto c = std::make_shared<FakeChannel>("group 7");
  auto l = h.launch_on(c);
  l->set_cancelled(std::make_exception_ptr(Unavailable("[step] lost")));
  h.dog.poll_once();
  ASSERT_EQ(l->fails().size(), 1u);
  h.dog.watch(c);
  EXPECT_EQ(h.dog.abort_reason(*c), std::optional<std::string>("[step] lost"));
  EXPECT_TRUE(h.dog.live_channels().empty());
  c->set_comm(NcclPoll::ready());
  EXPECT_EQ(h.dog.poll_once(), std::nullopt);
  EXPECT_EQ(c->opens(), 0);
}

// A launch whose issuer is inside NCCL's calls when its channel is aborted: failed once, and kept
// as a zombie; but only once the channel's abort (ncclCommAbort) has returned is it abandoned()
// (its event recorded after everything NCCL queued) and looked at. Before, an event never recorded
// would have said "done" while NCCL's kernels could still write into its buffers.
TEST(NcclWatchdog, ALaunchAbortedWhileBeingIssuedIsAZombieOnlyOnceTheChannelsAbortReturned) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  ASSERT_TRUE(h.dog.issuing(*l));
  h.dog.poll_once();
  EXPECT_EQ(l->finishes(), 0) << "the issuer finishes its own launch";
  size_t zombies_during_abort = 99;
  int abandons_during_abort = 99;
  c->set_on_abort([&] {
    zombies_during_abort = h.dog.zombies();
    abandons_during_abort = l->abandons();
  });
  h.dog.abort({c}, std::make_exception_ptr(Unavailable("[test] peer lost")));
  EXPECT_EQ(zombies_during_abort, 0u);
  EXPECT_EQ(abandons_during_abort, 0);
  EXPECT_EQ(l->abandons(), 1);
  EXPECT_EQ(l->fails(), std::vector<std::string>{"[test] peer lost"});
  EXPECT_EQ(h.dog.zombies(), 1u);
  EXPECT_FALSE(h.dog.issuing(*l)) << "a failed launch is not issued again";
  EXPECT_TRUE(h.dog.launched(*l, false));  // the issuer's NCCL calls returned meanwhile
  EXPECT_EQ(h.dog.zombies(), 1u);
  l->set_completion(NcclPoll::ready());
  h.dog.poll_once();
  EXPECT_EQ(h.dog.zombies(), 0u);
  EXPECT_EQ(l->completes(), 0);
  EXPECT_EQ(l->fails().size(), 1u);
}

// Aborted after ncclInProgress, before NCCL finished queuing: a zombie, abandoned once.
TEST(NcclWatchdog, ALaunchAbortedWhileInProgressIsAbandonedOnce) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  ASSERT_TRUE(h.dog.issuing(*l));
  EXPECT_FALSE(h.dog.launched(*l, true));
  h.dog.abort({c}, std::make_exception_ptr(Unavailable("[test] peer lost")));
  EXPECT_EQ(l->finishes(), 0);
  EXPECT_EQ(l->abandons(), 1);
  EXPECT_EQ(h.dog.zombies(), 1u);
  EXPECT_EQ(l->fails().size(), 1u);
}

// A queued launch never reached NCCL: failed, not a zombie, not abandoned, and not issued after.
TEST(NcclWatchdog, AQueuedLaunchAbortedIsNeitherAZombieNorIssued) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  h.dog.abort({c}, std::make_exception_ptr(Unavailable("[test] peer lost")));
  EXPECT_EQ(l->abandons(), 0);
  EXPECT_EQ(h.dog.zombies(), 0u);
  EXPECT_FALSE(h.dog.issuing(*l));
}

// A zombie whose event could not be recorded has nothing to wait for: dropped, failed once.
TEST(NcclWatchdog, AZombieThatCannotBeAbandonedIsDropped) {
  Harness h;
  auto c = h.ready_channel("link A");
  auto l = h.launch_on(c);
  h.dog.launched(*l, false);
  l->make_abandon_throw();
  h.dog.abort({c}, std::make_exception_ptr(Unavailable("[test] peer lost")));
  EXPECT_EQ(h.dog.zombies(), 0u);
  EXPECT_EQ(l->fails().size(), 1u);
}

TEST(NcclWatchdog, ItsThreadFindsCompletionsAndCommunicatorsByItself) {
  std::vector<std::string> failures;
  std::mutex mu;
  NcclWatchdog dog(60s, [&](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      failures.push_back(message_of(e));
    }
    dog.abort({c}, e);
  });
  auto c = std::make_shared<FakeChannel>("link A");
  dog.watch(c);
  c->set_comm(NcclPoll::ready());
  const auto limit = std::chrono::steady_clock::now() + 10s;  // bounded: a broken thread fails, never hangs
  while (c->opens() == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(c->opens(), 1);

  auto done = std::make_shared<FakeLaunch>(c);
  dog.watch(done);
  dog.launched(*done, false);
  done->set_completion(NcclPoll::ready());
  ASSERT_TRUE(done->wait_ended(10s));
  EXPECT_EQ(done->completes(), 1);

  auto broken = std::make_shared<FakeLaunch>(c);
  dog.watch(broken);
  dog.launched(*broken, false);
  c->set_comm(NcclPoll::failed("unhandled cuda error"));
  ASSERT_TRUE(broken->wait_ended(10s));
  EXPECT_EQ(broken->fails().size(), 1u);
  dog.stop();
  EXPECT_EQ(dog.zombies(), 1u);
  dog.wait_for_zombies();  // the owner's shutdown: each zombie waited for once
  EXPECT_EQ(broken->waits(), 1);
  EXPECT_EQ(dog.zombies(), 0u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(contains(failures[0], "NCCL error: unhandled cuda error")) << failures[0];
}

}  // namespace
}  // namespace weft
