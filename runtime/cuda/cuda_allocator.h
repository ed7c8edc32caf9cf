// The GPU allocator: stream-ordered allocation from the device's memory pool, with small blocks
// reused without calling the driver.
//
// Every block is allocated and freed on the device's compute stream (cudaMallocFromPoolAsync /
// cudaFreeAsync), so freeing a tensor never waits for the GPU: the block returns to the pool when
// the kernels queued before the free have run, and the next allocation on the same stream may
// reuse it at once. The pool's release threshold is raised to "never", so freed memory stays
// cached in the pool instead of going back to the driver at every synchronisation; release_cache()
// trims it. Anything that touches a block from another stream (the copy stream) must first wait
// for the compute stream (see CudaCopyEngine).
//
// Small blocks (up to kSmallBlockMax) come in power-of-two sizes and, when freed, go on a free
// list of their size on the host instead of back to the pool: the next allocation of that size
// takes one from the list, with no driver call. This is the same stream-ordered reuse the pool
// makes (every block is used and freed on the compute stream, so kernels queued after the reuse
// run after those queued before the free), without cudaMallocFromPoolAsync and cudaFreeAsync,
// which cost about a microsecond each: an eager op on small tensors is dominated by such calls.
// The lists hold at most kSmallCacheBytes; an allocation the pool cannot serve gives the lists'
// blocks back to the pool and tries once more, and release_cache() empties them.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

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

  // Lets GPU `peer` read and write every block of this allocator, present and future, so that a
  // copy between the two GPUs can run on the peer's stream without the host. Pool memory does not
  // follow cudaDeviceEnablePeerAccess: the pool itself must grant access (cudaMemPoolSetAccess).
  // False when it cannot be granted: no peer path between the two GPUs (cudaDeviceCanAccessPeer),
  // no pool, or the driver refuses; callers then copy through the host. Decided once per peer.
  bool share_with(int peer);

  // What the small-block lists hold.
  int64_t small_block_bytes_cached() const {
    std::lock_guard<std::mutex> lock(small_mu_);
    return small_cached_bytes_;
  }

  static constexpr size_t kSmallBlockMin = 512;
  static constexpr size_t kSmallBlockMax = size_t{1} << 20;
  static constexpr int64_t kSmallCacheBytes = int64_t{64} << 20;

 private:
  static constexpr int kSmallClasses = 12;  // 512 B .. 1 MiB
  // The size class of a small request, or -1.
  static int small_class(size_t bytes);
  void* allocate_from_driver(size_t bytes);
  void free_to_driver(void* ptr);
  // Gives every cached small block back to the pool (or the driver); returns how many.
  size_t flush_small_blocks();

  int device_;
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  bool pooled_ = false;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocs_{0};
  mutable std::mutex small_mu_;
  std::array<std::vector<void*>, kSmallClasses> small_free_;  // by class, freed blocks to reuse
  int64_t small_cached_bytes_ = 0;
  std::mutex share_mu_;
  std::map<int, bool> shared_with_;  // peer -> whether share_with granted it
};

}  // namespace weft
