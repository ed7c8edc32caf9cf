#include "runtime/allocator.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/error.h"

namespace weft {

namespace {

// Size classes: 64-byte granules up to 1 KiB, then four classes per power of two. Rounding up
// wastes at most 25% and lets a freed block serve any later request of its class.
constexpr size_t kSmallLimit = 32 << 10;     // per-thread caches below this
constexpr size_t kMaxCachedClass = size_t{1} << 34;
constexpr int kNumClasses = 160;
constexpr size_t kPerThreadSlots = 64;       // blocks kept per class per thread
constexpr size_t kGlobalCacheLimit = size_t{4} << 30;

int size_class(size_t bytes, size_t* rounded) {
  if (bytes <= 1024) {
    size_t n = bytes == 0 ? 1 : (bytes + 63) / 64;
    *rounded = n * 64;
    return static_cast<int>(n - 1);  // 0..15
  }
  int e = 63 - __builtin_clzll(bytes - 1);  // 2^e < bytes <= 2^(e+1)
  size_t quarter = size_t{1} << (e - 2);
  size_t k = (bytes - (size_t{1} << e) + quarter - 1) / quarter;  // 1..4
  *rounded = (size_t{1} << e) + k * quarter;
  return 16 + (e - 10) * 4 + static_cast<int>(k - 1);
}

void* system_alloc(size_t bytes) {
  void* p = std::aligned_alloc(CpuAllocator::kAlignment, bytes);
  if (!p) throw Unavailable("[allocator] out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

struct GlobalCache {
  std::mutex mu;
  std::vector<void*> lists[kNumClasses];
  size_t bytes = 0;
};
GlobalCache& global_cache() {
  static auto* cache = new GlobalCache();  // leaked on purpose: outlives thread-local caches
  return *cache;
}

std::atomic<int64_t> g_cached_bytes{0};

struct ThreadCache {
  std::vector<void*> lists[kNumClasses];
  int64_t bytes = 0;
  void clear() {
    for (auto& l : lists) {
      for (void* p : l) std::free(p);
      l.clear();
    }
    g_cached_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    bytes = 0;
  }
  ~ThreadCache() { clear(); }
};
thread_local ThreadCache t_cache;

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static auto* a = new CpuAllocator();  // leaked on purpose: tensors may die during static teardown
  return *a;
}

CpuAllocator::CpuAllocator() {
#if defined(__SANITIZE_ADDRESS__)
  caching_ = false;  // let AddressSanitizer see every use-after-free
#endif
}

void CpuAllocator::note_alloc(size_t bytes) {
  allocs_.fetch_add(1, std::memory_order_relaxed);
  int64_t now = in_use_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) + bytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* CpuAllocator::allocate(size_t bytes) {
  void* p = allocate_block(bytes);
  note_alloc(bytes);  // after the block exists: a refused request must not count as in use
  return p;
}

void* CpuAllocator::allocate_block(size_t bytes) {
  // Beyond the cached classes straight to the system, before size_class, whose rounding would
  // wrap around for requests near 2^64.
  if (bytes > kMaxCachedClass) {
    if (bytes > SIZE_MAX - kAlignment) throw Unavailable("[allocator] cannot allocate " + std::to_string(bytes) + " bytes");
    return system_alloc((bytes + kAlignment - 1) / kAlignment * kAlignment);
  }
  size_t rounded;
  int cls = size_class(bytes, &rounded);
  if (!caching_.load(std::memory_order_relaxed) || rounded > kMaxCachedClass) {
    return system_alloc((bytes + kAlignment - 1) / kAlignment * kAlignment + (bytes == 0 ? kAlignment : 0));
  }
  if (rounded <= kSmallLimit) {
    auto& l = t_cache.lists[cls];
    if (!l.empty()) {
      void* p = l.back();
      l.pop_back();
      t_cache.bytes -= static_cast<int64_t>(rounded);
      g_cached_bytes.fetch_sub(static_cast<int64_t>(rounded), std::memory_order_relaxed);
      return p;
    }
  } else {
    auto& g = global_cache();
    std::lock_guard<std::mutex> lock(g.mu);
    auto& l = g.lists[cls];
    if (!l.empty()) {
      void* p = l.back();
      l.pop_back();
      g.bytes -= rounded;
      g_cached_bytes.fetch_sub(static_cast<int64_t>(rounded), std::memory_order_relaxed);
      return p;
    }
  }
  return system_alloc(rounded);
}

void CpuAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (bytes > kMaxCachedClass) {  // never cached (see allocate_block)
    std::free(ptr);
    return;
  }
  size_t rounded;
  int cls = size_class(bytes, &rounded);
  // A block allocated while caching was off has only its exact size; caching it would hand it to a
  // larger request of its class. (Sized exactly so that AddressSanitizer sees overruns.)
  if (!caching_.load(std::memory_order_relaxed) || rounded > kMaxCachedClass || malloc_usable_size(ptr) < rounded) {
    std::free(ptr);
    return;
  }
  if (rounded <= kSmallLimit) {
    auto& l = t_cache.lists[cls];
    if (l.size() < kPerThreadSlots) {
      l.push_back(ptr);
      t_cache.bytes += static_cast<int64_t>(rounded);
      g_cached_bytes.fetch_add(static_cast<int64_t>(rounded), std::memory_order_relaxed);
      return;
    }
  } else {
    auto& g = global_cache();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.bytes + rounded <= kGlobalCacheLimit) {
      g.lists[cls].push_back(ptr);
      g.bytes += rounded;
      g_cached_bytes.fetch_add(static_cast<int64_t>(rounded), std::memory_order_relaxed);
      return;
    }
  }
  std::free(ptr);
}

AllocatorStats CpuAllocator::stats() const {
  AllocatorStats s;
  s.bytes_in_use = in_use_.load();
  s.peak_bytes_in_use = peak_.load();
  s.num_allocs = allocs_.load();
  s.bytes_cached = g_cached_bytes.load();
  return s;
}

void CpuAllocator::reset_peak() { peak_.store(in_use_.load()); }

// Frees this thread's cache and the shared one; other threads' small-block caches stay.
void CpuAllocator::release_cache() {
  t_cache.clear();
  int64_t freed = 0;
  auto& g = global_cache();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& l : g.lists) {
    for (void* p : l) std::free(p);
    l.clear();
  }
  freed += static_cast<int64_t>(g.bytes);
  g.bytes = 0;
  g_cached_bytes.fetch_sub(freed);
}

}  // namespace weft
