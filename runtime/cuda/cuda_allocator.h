// The GPU allocator: stream-ordered allocation from the device's memory pool.
//
// Every block is allocated and freed on the device's compute stream (cudaMallocFromPoolAsync /
// cudaFreeAsync), so freeing a tensor never waits for the GPU: the block returns to the pool when
// the kernels queued before the free have run, and the next allocation on the same stream may
// reuse it at once. The pool's release threshold is raised to "never", so freed memory stays
// cached in the pool instead of going back to the driver at every synchronisation; release_cache()
// trims it. Anything that touches a block from another stream (the copy stream) must first wait
// for the compute stream (see CudaCopyEngine).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "runtime/allocator.h"

namespace weft {

class CudaAllocator final : public Allocator {
 public:
  // `stream` is the device's compute stream; it outlives the allocator.
  CudaAllocator(int device, cudaStream_t stream);

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  // Unavailable when the GPU is out of memory.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  // bytes_cached: memory the pool holds beyond what live blocks use.
  AllocatorStats stats() const override;
  void reset_peak() override;
  // Waits for the compute stream, then returns the pool's unused memory to the driver.
  void release_cache() override;

  // False on devices without memory pools; then blocks come from cudaMalloc and a free waits for
  // the compute stream first.
  bool stream_ordered() const { return pooled_; }

 private:
  int device_;
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  bool pooled_ = false;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocs_{0};
};

}  // namespace weft
