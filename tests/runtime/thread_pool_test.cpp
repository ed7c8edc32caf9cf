// ThreadPool::parallel_for: coverage, chunking, exceptions and nesting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace weft {
namespace {

// Runs f on another thread and fails (instead of hanging the suite) if it does not finish.
template <class F>
void within_seconds(int seconds, F f) {
  auto fut = std::async(std::launch::async, f);
  if (fut.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "deadlock: did not finish within " << seconds << " s";
    std::fflush(nullptr);
    std::_Exit(1);  // a deadlocked pool cannot be torn down
  }
  fut.get();
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 16, 31, 100, 1000, 4097, 12345}) {
      for (int64_t grain : {0, 1, 2, 3, 7, 64, 1000, 1 << 20}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " n=" << n << " grain=" << grain);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        std::atomic<bool> bad_range{false};
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          if (!(0 <= b && b < e && e <= n)) bad_range = true;  // every chunk is non-empty and in range
          ++calls;
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        EXPECT_FALSE(bad_range);
        EXPECT_LE(calls.load(), threads);
        if (n > 0 && n <= grain) {
          EXPECT_EQ(calls.load(), 1);
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
      }
    }
  }
}

TEST(ThreadPool, UsesMoreThanOneThreadForBigWork) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.parallel_for(4, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ids.size(), 1u);
  EXPECT_TRUE(ids.count(std::this_thread::get_id())) << "the caller works too";
}

TEST(ThreadPool, ExceptionsPropagate) {
  ThreadPool pool(4);
  // From the caller's own chunk (the first) and from a worker's chunk (the last).
  for (int64_t bad : {int64_t{0}, int64_t{99}}) {
    try {
      pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
        if (b <= bad && bad < e) throw std::out_of_range("index " + std::to_string(bad));
      });
      ADD_FAILURE() << "no exception for " << bad;
    } catch (const std::out_of_range& e) {
      EXPECT_EQ(std::string(e.what()), "index " + std::to_string(bad));
    }
  }
  // Everything throws: exactly one exception comes out, and the pool still works afterwards.
  EXPECT_THROW(pool.parallel_for(100, 1, [](int64_t, int64_t) { throw std::runtime_error("all"); }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, NestedParallelForDoesNotDeadlock) {
  within_seconds(30, [] {
    ThreadPool pool(4);
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<std::atomic<int>> hits(64 * 64);
      pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          pool.parallel_for(64, 1, [&](int64_t bj, int64_t ej) {
            for (int64_t j = bj; j < ej; ++j) hits[static_cast<size_t>(i * 64 + j)]++;
          });
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  });
}

TEST(ThreadPool, ManyCallersShareOnePool) {
  within_seconds(30, [] {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&] {
        for (int rep = 0; rep < 200; ++rep)
          pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
      });
    for (auto& t : callers) t.join();
    EXPECT_EQ(total.load(), 4 * 200 * 1000);
  });
}

TEST(ThreadPool, IdlePoolShutsDown) {
  within_seconds(30, [] {
    for (int i = 0; i < 10; ++i) ThreadPool pool(4);
  });
}

}  // namespace
}  // namespace weft
