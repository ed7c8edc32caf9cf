// Allocators hand out device memory and keep statistics. The CPU allocator returns 64-byte aligned
// blocks and caches freed blocks by size class, so a steady eager loop or training step reuses
// memory instead of paying malloc and page faults on every op (large tensors especially). Blocks
// from 256 KiB up are backed by transparent huge pages (runtime/huge_page_blocks.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

struct AllocatorStats {
  int64_t bytes_in_use = 0;       // requested bytes currently held by tensors
  int64_t peak_bytes_in_use = 0;  // high-water mark since start or reset_peak()
  int64_t num_allocs = 0;         // allocate() calls since start
  int64_t bytes_cached = 0;       // freed bytes kept for reuse
  int64_t huge_page_bytes = 0;    // host memory mapped for large blocks on huge pages
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string name() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached blocks to the system.
  virtual void release_cache() {}
};

// Shared by every CPU device of the process.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static CpuAllocator& instance();

  std::string name() const override { return "cpu"; }
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void release_cache() override;

  // Tests and sanitizer builds turn caching off so every block comes from the system.
  void set_caching(bool enabled) {
    if (!enabled) exact_blocks_.store(true);  // before the first block allocated uncached
    caching_.store(enabled, std::memory_order_release);
  }
  bool caching() const { return caching_; }
  // Whether `block` (one this allocator handed out) lies on huge pages rather than malloc's heap.
  bool on_huge_pages(const void* block) const;

 private:
  CpuAllocator();
  void* allocate_block(size_t bytes);
  void note_alloc(size_t bytes);

  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<bool> caching_{true};
  // Whether any block was ever allocated with caching off, at its exact size rather than its
  // class's: only then must a freed block's real size be looked up before caching it.
  std::atomic<bool> exact_blocks_{false};
};

}  // namespace weft
