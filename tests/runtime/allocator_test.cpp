// The CPU caching allocator: alignment, statistics, reuse, and switching caching on and off.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/tensor.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

// Restores the process-wide caching switch, whatever the test did with it.
class CachingGuard {
 public:
  explicit CachingGuard(bool enabled) : saved_(CpuAllocator::instance().caching()) {
    CpuAllocator::instance().set_caching(enabled);
  }
  ~CachingGuard() { CpuAllocator::instance().set_caching(saved_); }

 private:
  bool saved_;
};

const std::vector<size_t> kSizes = {0,    1,    7,    63,    64,    65,     100,       1000,     1023,
                                    1024, 1025, 1500, 4096,  4097,  10000,  32 << 10,  (32 << 10) + 1,
                                    100000, 1 << 20, (1 << 20) + 3, 3 << 20};

TEST(CpuAllocator, SixtyFourByteAlignmentForManySizes) {
  for (bool caching : {true, false}) {
    CachingGuard guard(caching);
    CpuAllocator& a = CpuAllocator::instance();
    std::vector<std::pair<void*, size_t>> live;
    for (int round = 0; round < 3; ++round) {  // later rounds are served from the cache
      for (size_t n : kSizes) {
        void* p = a.allocate(n);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % CpuAllocator::kAlignment, 0u) << n;
        if (!a.on_huge_pages(p)) {
          EXPECT_GE(malloc_usable_size(p), n) << n;
        }
        if (n) std::memset(p, 0xab, n);  // the whole block must be writable (ASan checks)
        live.emplace_back(p, n);
      }
      for (auto [p, n] : live) a.deallocate(p, n);
      live.clear();
    }
  }
}

TEST(CpuAllocator, TensorsAreAligned) {
  for (int64_t n : {1, 3, 17, 1000, 12345}) {
    Tensor t = Tensor::empty(DType::Int8, Shape{n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(raw_data(t)) % 64, 0u) << n;
  }
}

TEST(CpuAllocator, StatsFollowTensorLifetimes) {
  CpuAllocator& a = CpuAllocator::instance();
  const AllocatorStats before = a.stats();
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, before.bytes_in_use);
  {
    Tensor x = Tensor::empty(DType::Float32, Shape{1000});
    AllocatorStats s = a.stats();
    EXPECT_EQ(s.bytes_in_use, before.bytes_in_use + 4000);
    EXPECT_EQ(s.num_allocs, before.num_allocs + 1);
    {
      Tensor y = Tensor::empty(DType::Float64, Shape{10, 10});
      Tensor view = y.view(Shape{100});  // a view shares the buffer: no allocation
      s = a.stats();
      EXPECT_EQ(s.bytes_in_use, before.bytes_in_use + 4800);
      EXPECT_EQ(s.num_allocs, before.num_allocs + 2);
    }
    s = a.stats();
    EXPECT_EQ(s.bytes_in_use, before.bytes_in_use + 4000);
    EXPECT_EQ(s.peak_bytes_in_use, before.bytes_in_use + 4800);
  }
  AllocatorStats after = a.stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.peak_bytes_in_use, before.bytes_in_use + 4800);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, before.bytes_in_use);
}

TEST(CpuAllocator, StatsCountEveryThreadsAllocationsAfterItExits) {
  // Each thread counts its own allocations and cached bytes; stats() adds them up, and a thread
  // that exits hands its count over.
  CachingGuard guard(true);
  CpuAllocator& a = CpuAllocator::instance();
  const AllocatorStats before = a.stats();
  std::thread worker([&] {
    for (int i = 0; i < 5; ++i) a.deallocate(a.allocate(100), 100);
    EXPECT_GE(a.stats().bytes_cached, before.bytes_cached + 128);  // one 128-byte block kept
  });
  worker.join();
  const AllocatorStats after = a.stats();
  EXPECT_EQ(after.num_allocs, before.num_allocs + 5);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.bytes_cached, before.bytes_cached);  // the exited thread's cache was freed
}

TEST(CpuAllocator, CachingReusesFreedBlocks) {
  CachingGuard guard(true);
  CpuAllocator& a = CpuAllocator::instance();
  for (size_t n : {size_t{100}, size_t{5000}, size_t{1} << 20}) {  // per-thread and shared caches
    void* p = a.allocate(n);
    int64_t cached_before = a.stats().bytes_cached;
    a.deallocate(p, n);
    EXPECT_GT(a.stats().bytes_cached, cached_before) << n;
    void* q = a.allocate(n);
    EXPECT_EQ(p, q) << "size " << n << " was not served from the cache";
    EXPECT_EQ(a.stats().bytes_cached, cached_before) << n;
    a.deallocate(q, n);
  }
  a.release_cache();
  EXPECT_EQ(a.stats().bytes_cached, 0);
}

TEST(CpuAllocator, CachingOffReturnsBlocksToTheSystem) {
  CachingGuard guard(false);
  CpuAllocator& a = CpuAllocator::instance();
  a.release_cache();
  void* p = a.allocate(5000);
  a.deallocate(p, 5000);
  EXPECT_EQ(a.stats().bytes_cached, 0);
}

// A block allocated with caching off and freed with caching on enters the cache; it must be as
// large as any later request of its size class.
TEST(CpuAllocator, TogglingCachingKeepsBlocksLargeEnough) {
  CpuAllocator& a = CpuAllocator::instance();
  for (size_t n : {size_t{1100}, size_t{5000}, size_t{40000}, size_t{300000}}) {
    void* p;
    {
      CachingGuard off(false);
      p = a.allocate(n);
    }
    CachingGuard on(true);
    a.deallocate(p, n);
    // Ask for more than n but within n's size class: one of these gets p back from the cache.
    for (size_t m = n; m < n + n / 8; m += 8) {
      void* q = a.allocate(m);
      if (!a.on_huge_pages(q)) {
        ASSERT_GE(malloc_usable_size(q), m) << "block of " << n << " handed out for " << m;
      }
      std::memset(q, 0, m);
      a.deallocate(q, m);
    }
  }
  a.release_cache();
}

TEST(CpuAllocator, FreeOnAnotherThread) {
  CachingGuard guard(true);
  CpuAllocator& a = CpuAllocator::instance();
  int64_t in_use = a.stats().bytes_in_use;
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(a.allocate(256 + i));
  std::thread t([&] {
    for (int i = 0; i < 100; ++i) a.deallocate(blocks[i], 256 + i);
  });
  t.join();
  EXPECT_EQ(a.stats().bytes_in_use, in_use);
}

}  // namespace
}  // namespace weft
