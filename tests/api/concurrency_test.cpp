// Eager ops and traced functions from several user threads at once share the CPU device, its
// pool, the allocator, and a function's trace cache and executors.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/function.h"
#include "reference.h"

namespace weft {
namespace {

TEST(Concurrency, EagerOpsFromManyThreads) {
  constexpr int kThreads = 4, kIters = 20;
  const int64_t n = 1 << 16;  // above the parallel grain: every call also uses the pool
  std::vector<float> a = ref::random_values<float>(n, 11, -5, 5), b = ref::random_values<float>(n, 12, -5, 5);
  Tensor ta = constant(a, Shape{n}), tb = constant(b, Shape{n});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIters; ++it) {
        float k = static_cast<float>(t * kIters + it);
        std::vector<float> got = ((ta + tb) * k).to_vector<float>();
        for (int64_t i = 0; i < n; ++i)
          if (got[i] != (a[i] + b[i]) * k) {
            ++wrong;
            break;
          }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Concurrency, OneTracedFunctionFromManyThreads) {
  // Threads alternate between two signatures at different rates, so calls on the lock-free path
  // of a steady signature overlap with calls that take the cache's lock, and runs of one
  // executor overlap (each needs its own run state).
  constexpr int kThreads = 4, kIters = 300;
  auto f = function([](Tensor x, Tensor y) { return relu(x * y + 1.f); });
  const std::vector<float> small = {-2.f, 0.5f, 3.f}, large = ref::random_values<float>(1000, 13, -2, 2);
  Tensor xs = constant(small, Shape{3}), xl = constant(large, Shape{1000});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIters; ++it) {
        const bool use_large = (it / (t + 1)) % 2 == 1;
        const std::vector<float>& x = use_large ? large : small;
        const float k = static_cast<float>(t + 1);
        std::vector<float> got = f(use_large ? xl : xs, fill({static_cast<int64_t>(x.size())}, k)).to_vector<float>();
        for (size_t i = 0; i < x.size(); ++i)
          if (got[i] != std::max(x[i] * k + 1.f, 0.f)) {
            ++wrong;
            break;
          }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(Concurrency, DeviceScopesArePerThread) {
  std::string seen;
  {
    DeviceScope s("/cpu:0");
    std::thread other([&] { seen = current_device_request(); });
    other.join();
    EXPECT_EQ(current_device_request(), "/cpu:0");
  }
  EXPECT_EQ(seen, "") << "a scope on one thread must not leak into another";
}

}  // namespace
}  // namespace weft
