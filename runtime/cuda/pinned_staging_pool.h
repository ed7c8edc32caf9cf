// Pinned (page-locked) host blocks through which pageable host memory reaches a GPU: the DMA
// engine reads and writes only pinned memory, and a copy through our own staging block lets the
// caller's buffer go (or be filled) on the host's schedule instead of the driver's.
//
// Two block sizes keep it simple and the pool small: kSmallBytes for small tensors (most transfers
// of a training step are a few KiB) and kChunkBytes for everything else, which copies split into
// chunks. cudaMallocHost costs milliseconds, so released blocks are kept, up to a cap per size;
// blocks beyond the cap are freed. Acquiring never waits: under pressure it allocates.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace weft {

class PinnedStagingPool {
 public:
  static constexpr size_t kSmallBytes = size_t{64} << 10;
  static constexpr size_t kChunkBytes = size_t{4} << 20;
  static constexpr size_t kMaxCachedSmall = 64;
  static constexpr size_t kMaxCachedChunks = 32;  // 128 MiB

  struct Block {
    void* data = nullptr;
    size_t capacity = 0;
  };

  PinnedStagingPool() = default;
  ~PinnedStagingPool();
  PinnedStagingPool(const PinnedStagingPool&) = delete;
  PinnedStagingPool& operator=(const PinnedStagingPool&) = delete;

  // A block of at least `bytes` (at most kChunkBytes). Internal when pinning fails.
  Block acquire(size_t bytes);
  void release(Block block);

 private:
  std::mutex mu_;
  std::vector<void*> small_, chunks_;
};

}  // namespace weft
