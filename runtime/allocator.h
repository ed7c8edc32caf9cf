// Allocators hand out device memory and keep statistics. The CPU allocator returns 64-byte aligned
// blocks and caches freed blocks by size class, so a steady eager loop or training step reuses
// memory instead of paying malloc and page faults on every op (large tensors especially).
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
  void set_caching(bool enabled) { caching_ = enabled; }
  bool caching() const { return caching_; }

 private:
  CpuAllocator();
  void* allocate_block(size_t bytes);
  void note_alloc(size_t bytes);

  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocs_{0};
  std::atomic<bool> caching_{true};
};

}  // namespace weft
