// Eager ops from several user threads at once share the CPU device, its pool and the allocator.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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
