#include "runtime/cuda/pinned_staging_pool.h"

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.h"

namespace weft {

PinnedStagingPool::~PinnedStagingPool() {
  for (void* p : small_) ignore_cuda_error(cudaFreeHost(p));
  for (void* p : chunks_) ignore_cuda_error(cudaFreeHost(p));
}

PinnedStagingPool::Block PinnedStagingPool::acquire(size_t bytes) {
  if (bytes > kChunkBytes) throw Internal("[cuda] a staging block holds at most 4 MiB, asked for " + std::to_string(bytes));
  const bool small = bytes <= kSmallBytes;
  const size_t capacity = small ? kSmallBytes : kChunkBytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<void*>& cached = small ? small_ : chunks_;
    if (!cached.empty()) {
      void* p = cached.back();
      cached.pop_back();
      return {p, capacity};
    }
  }
  void* p = nullptr;
  // Portable: a block may stage copies for any GPU of the process.
  check_cuda(cudaHostAlloc(&p, capacity, cudaHostAllocPortable), "cudaHostAlloc(staging)");
  return {p, capacity};
}

void PinnedStagingPool::release(Block block) {
  if (!block.data) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool small = block.capacity == kSmallBytes;
    std::vector<void*>& cached = small ? small_ : chunks_;
    if (cached.size() < (small ? kMaxCachedSmall : kMaxCachedChunks)) {
      cached.push_back(block.data);
      return;
    }
  }
  ignore_cuda_error(cudaFreeHost(block.data));
}

}  // namespace weft
