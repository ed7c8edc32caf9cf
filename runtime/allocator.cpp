#include "runtime/allocator.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/error.h"
#include "runtime/huge_page_blocks.h"

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

HugePageBlocks& huge_blocks() {
  static auto* blocks = new HugePageBlocks();  // leaked on purpose: tensors may die during static teardown
  return *blocks;
}

// A cacheable block of a class's size: large ones on huge pages (runtime/huge_page_blocks.h).
void* new_class_block(size_t rounded) {
  HugePageBlocks& huge = huge_blocks();
  return huge.takes(rounded) ? huge.allocate(rounded) : system_alloc(rounded);
}

// Back to the system, wherever the block came from.
void release_block(void* p) {
  if (!huge_blocks().deallocate(p)) std::free(p);
}

// The same for a block whose size class is known: only a class that huge pages take needs the
// lookup (and its lock), so small blocks and sanitizer builds' frees go straight to malloc.
void release_class_block(void* p, size_t rounded) {
  if (huge_blocks().takes(rounded)) release_block(p);
  else std::free(p);
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

// A count written by one thread only and read by any: a plain load and store instead of an
// atomic read-modify-write, which would cost more than the rest of a small allocation.
void bump(std::atomic<int64_t>& counter, int64_t by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

struct ThreadCache;
// Every live thread cache, so that stats() can add up their counts.
struct Registry {
  std::mutex mu;
  std::vector<const ThreadCache*> live;
  int64_t retired_allocs = 0;  // counted by threads that have exited
};
Registry& registry() {
  static auto* r = new Registry();  // leaked on purpose: outlives thread-local caches
  return *r;
}

// One thread's cache of small blocks, and the statistics only that thread writes.
struct ThreadCache {
  std::vector<void*> lists[kNumClasses];
  std::atomic<int64_t> bytes{0};   // cached in `lists`
  std::atomic<int64_t> allocs{0};  // allocate() calls made by this thread
  ThreadCache() {
    std::lock_guard lock(registry().mu);
    registry().live.push_back(this);
  }
  ~ThreadCache() {
    clear();
    std::lock_guard lock(registry().mu);
    std::erase(registry().live, this);
    registry().retired_allocs += allocs.load(std::memory_order_relaxed);
  }
  void clear() {
    // Blocks under kSmallLimit: always malloc's, never on huge pages.
    for (auto& l : lists) {
      for (void* p : l) std::free(p);
      l.clear();
    }
    bytes.store(0, std::memory_order_relaxed);
  }
};

// This thread's cache. A plain pointer, which stays readable after the thread's thread_local
// destructors have run: tensors in static storage die after them, at exit, and from then on
// their blocks go straight back to the system.
thread_local ThreadCache* t_cache = nullptr;
thread_local bool t_cache_gone = false;
struct ThreadCacheOwner {
  bool armed = false;
  ~ThreadCacheOwner() {
    delete t_cache;
    t_cache = nullptr;
    t_cache_gone = true;
  }
};
thread_local ThreadCacheOwner t_cache_owner;

// Null once this thread is exiting.
ThreadCache* thread_cache() {
  if (t_cache) [[likely]] return t_cache;
  if (t_cache_gone) return nullptr;
  t_cache = new ThreadCache();
  t_cache_owner.armed = true;  // a use of the owner, so that its destructor runs at thread exit
  return t_cache;
}

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static auto* a = new CpuAllocator();  // leaked on purpose: tensors may die during static teardown
  return *a;
}

CpuAllocator::CpuAllocator() {
#if defined(__SANITIZE_ADDRESS__)
  set_caching(false);  // let AddressSanitizer see every use-after-free
#endif
}

void CpuAllocator::note_alloc(size_t bytes) {
  if (ThreadCache* c = thread_cache()) {
    bump(c->allocs, 1);
  } else {
    std::lock_guard lock(registry().mu);
    ++registry().retired_allocs;
  }
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
  // Acquire: pairs with set_caching's release, so exact_blocks_ is seen set by whoever frees this.
  if (!caching_.load(std::memory_order_acquire) || rounded > kMaxCachedClass) {
    return system_alloc((bytes + kAlignment - 1) / kAlignment * kAlignment + (bytes == 0 ? kAlignment : 0));
  }
  if (rounded <= kSmallLimit) {
    ThreadCache* c = thread_cache();
    if (c && !c->lists[cls].empty()) {
      void* p = c->lists[cls].back();
      c->lists[cls].pop_back();
      bump(c->bytes, -static_cast<int64_t>(rounded));
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
      return p;
    }
  }
  return new_class_block(rounded);
}

void CpuAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (bytes > kMaxCachedClass) {  // never cached, and from malloc (see allocate_block)
    std::free(ptr);
    return;
  }
  size_t rounded;
  int cls = size_class(bytes, &rounded);
  // A block allocated while caching was off has only its exact size; caching it would hand it to a
  // larger request of its class. (Sized exactly so that AddressSanitizer sees overruns.) Blocks on
  // huge pages are class-sized and not malloc's, so malloc_usable_size must not see them.
  if (!caching_.load(std::memory_order_relaxed) || rounded > kMaxCachedClass ||
      (exact_blocks_.load(std::memory_order_relaxed) && !huge_blocks().owns(ptr) && malloc_usable_size(ptr) < rounded)) {
    release_class_block(ptr, rounded);
    return;
  }
  if (rounded <= kSmallLimit) {
    ThreadCache* c = thread_cache();
    if (c && c->lists[cls].size() < kPerThreadSlots) {
      c->lists[cls].push_back(ptr);
      bump(c->bytes, static_cast<int64_t>(rounded));
      return;
    }
  } else {
    auto& g = global_cache();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.bytes + rounded <= kGlobalCacheLimit) {
      g.lists[cls].push_back(ptr);
      g.bytes += rounded;
      return;
    }
  }
  release_class_block(ptr, rounded);
}

AllocatorStats CpuAllocator::stats() const {
  AllocatorStats s;
  s.bytes_in_use = in_use_.load();
  s.peak_bytes_in_use = peak_.load();
  {
    std::lock_guard lock(registry().mu);
    s.num_allocs = registry().retired_allocs;
    for (const ThreadCache* c : registry().live) {
      s.num_allocs += c->allocs.load(std::memory_order_relaxed);
      s.bytes_cached += c->bytes.load(std::memory_order_relaxed);
    }
  }
  auto& g = global_cache();
  std::lock_guard lock(g.mu);
  s.bytes_cached += static_cast<int64_t>(g.bytes);
  s.huge_page_bytes = huge_blocks().mapped_bytes();
  return s;
}

bool CpuAllocator::on_huge_pages(const void* block) const { return huge_blocks().owns(block); }

void CpuAllocator::reset_peak() { peak_.store(in_use_.load()); }

// Frees this thread's cache and the shared one; other threads' small-block caches stay.
void CpuAllocator::release_cache() {
  if (ThreadCache* c = thread_cache()) c->clear();
  auto& g = global_cache();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& l : g.lists) {
    for (void* p : l) release_block(p);
    l.clear();
  }
  g.bytes = 0;
}

}  // namespace weft
