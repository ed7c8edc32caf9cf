// CancellationManager: callbacks run exactly once, with the first error, whoever registers,
// deregisters or cancels and from whichever thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/cancellation.h"
#include "runtime/error.h"
#include "runtime/graph.h"
#include "runtime/kernel_registry.h"
#include "runtime/run_context.h"

namespace weft {
namespace {

std::exception_ptr lost(const std::string& what) { return std::make_exception_ptr(Unavailable(what)); }

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.what();
  }
}

TEST(Cancellation, CallbacksRunOnceInOrderWithTheError) {
  CancellationManager cm;
  std::vector<int> order;
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i)
    EXPECT_NE(cm.register_callback([&, i](const std::exception_ptr& e) {
      order.push_back(i);
      seen.push_back(message_of(e));
    }), kNoCancellationToken);
  EXPECT_FALSE(cm.is_cancelled());
  EXPECT_FALSE(cm.error());
  EXPECT_TRUE(cm.cancel(lost("task 3 lost")));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(seen, (std::vector<std::string>(3, "task 3 lost")));
  EXPECT_TRUE(cm.is_cancelled());
  EXPECT_EQ(message_of(cm.error()), "task 3 lost");

  EXPECT_FALSE(cm.cancel(lost("second"))) << "only the first cancel counts";
  EXPECT_EQ(order.size(), 3u);
  EXPECT_EQ(message_of(cm.error()), "task 3 lost");
  EXPECT_THROW(std::rethrow_exception(cm.error()), Unavailable) << "the error keeps its class";
}

TEST(Cancellation, RegisteringAfterCancelRunsAtOnce) {
  CancellationManager cm;
  cm.cancel(lost("gone"));
  int runs = 0;
  std::string seen;
  CancellationToken t = cm.register_callback([&](const std::exception_ptr& e) {
    ++runs;
    seen = message_of(e);
  });
  EXPECT_EQ(t, kNoCancellationToken);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(seen, "gone");
  EXPECT_FALSE(cm.deregister_callback(t));
}

TEST(Cancellation, DeregisteredCallbacksDoNotRun) {
  CancellationManager cm;
  int a = 0, b = 0;
  CancellationToken ta = cm.register_callback([&](const std::exception_ptr&) { ++a; });
  CancellationToken tb = cm.register_callback([&](const std::exception_ptr&) { ++b; });
  EXPECT_NE(ta, tb);
  EXPECT_TRUE(cm.deregister_callback(ta));
  EXPECT_FALSE(cm.deregister_callback(ta)) << "twice";
  EXPECT_FALSE(cm.deregister_callback(12345)) << "never registered";
  cm.cancel(lost("x"));
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_FALSE(cm.deregister_callback(tb)) << "it has run";
}

TEST(Cancellation, CallbacksMayDeregisterAndRegisterWhileCancelling) {
  CancellationManager cm;
  int late = 0, second = 0;
  CancellationToken t2 = 0;
  cm.register_callback([&](const std::exception_ptr&) {
    // Neither may deadlock: this thread is the canceller.
    EXPECT_FALSE(cm.deregister_callback(t2));
    cm.register_callback([&](const std::exception_ptr&) { ++late; });
  });
  t2 = cm.register_callback([&](const std::exception_ptr&) { ++second; });
  cm.cancel(lost("x"));
  EXPECT_EQ(late, 1) << "registered during cancellation: runs at once";
  EXPECT_EQ(second, 1) << "cancellation had already taken it";
}

TEST(Cancellation, AThrowingCallbackDoesNotStopTheOthers) {
  CancellationManager cm;
  int after = 0;
  cm.register_callback([](const std::exception_ptr&) { throw Internal("callback bug"); });
  cm.register_callback([&](const std::exception_ptr&) { ++after; });
  EXPECT_THROW(cm.cancel(lost("x")), Internal);
  EXPECT_EQ(after, 1);
  EXPECT_TRUE(cm.is_cancelled());
}

TEST(Cancellation, NullErrorIsRefused) {
  CancellationManager cm;
  EXPECT_THROW(cm.cancel(nullptr), InvalidArgument);
  EXPECT_FALSE(cm.is_cancelled());
}

TEST(Cancellation, DeregisterWaitsForARunningCallback) {
  CancellationManager cm;
  std::atomic<bool> started{false}, release{false}, finished{false};
  std::atomic<bool> finished_when_deregister_returned{false};
  CancellationToken t = cm.register_callback([&](const std::exception_ptr&) {
    started = true;
    while (!release) std::this_thread::yield();
    finished = true;
  });
  std::thread canceller([&] { cm.cancel(lost("x")); });
  while (!started) std::this_thread::yield();
  std::thread deregisterer([&] {
    EXPECT_FALSE(cm.deregister_callback(t));
    finished_when_deregister_returned = finished.load();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release = true;
  deregisterer.join();
  canceller.join();
  EXPECT_TRUE(finished_when_deregister_returned) << "deregister returned while its callback still ran";
}

TEST(Cancellation, ConcurrentRegistrationsRunExactlyOnceUnlessDeregistered) {
  constexpr int kThreads = 4, kPerThread = 2000;
  CancellationManager cm;
  std::vector<std::atomic<int>> runs(kThreads * kPerThread);
  std::vector<char> deregistered(kThreads * kPerThread, 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        int id = t * kPerThread + i;
        CancellationToken tok = cm.register_callback([&runs, id](const std::exception_ptr&) { runs[id]++; });
        if (i % 2 && cm.deregister_callback(tok)) deregistered[id] = 1;
      }
    });
  std::thread canceller([&] {
    while (!go) std::this_thread::yield();
    std::this_thread::yield();
    cm.cancel(lost("x"));
  });
  go = true;
  for (auto& th : threads) th.join();
  canceller.join();
  for (int id = 0; id < kThreads * kPerThread; ++id)
    ASSERT_EQ(runs[id].load(), deregistered[id] ? 0 : 1) << "registration " << id;
}

// A RunContext written before steps, rendezvous and cancellation existed still compiles and
// reports a run that nothing else takes part in.
class OldRunContext final : public RunContext {
 public:
  VariableState& variable(std::string_view name) override { throw NotFound(std::string(name)); }
  std::vector<Tensor> call(const GraphIR&, std::span<const Tensor>, Device&) override { return {}; }
};

TEST(RunContext, DefaultsDescribeAStandaloneRun) {
  OldRunContext rc;
  const RunContext& r = rc;
  EXPECT_EQ(r.step_id(), 0);
  EXPECT_EQ(r.rendezvous(), nullptr);
  EXPECT_EQ(r.cancellation(), nullptr);
}

}  // namespace
}  // namespace weft
