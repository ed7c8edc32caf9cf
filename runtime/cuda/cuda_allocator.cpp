#include "runtime/cuda/cuda_allocator.h"

#include <cstdint>

#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace weft {

CudaAllocator::CudaAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  int supported = 0;
  check_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
             "cudaDeviceGetAttribute(MemoryPoolsSupported)");
  if (!supported) return;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool_, device), "cudaDeviceGetDefaultMemPool");
  // Keep freed memory in the pool: by default the pool gives it back to the driver whenever a
  // stream synchronises, and the next step would pay cudaMalloc's price again.
  uint64_t threshold = UINT64_MAX;
  check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
             "cudaMemPoolSetAttribute(ReleaseThreshold)");
  pooled_ = true;
}

int CudaAllocator::small_class(size_t bytes) {
  if (bytes > kSmallBlockMax) return -1;
  int c = 0;
  for (size_t size = kSmallBlockMin; size < bytes; size <<= 1) ++c;
  return c;
}

void* CudaAllocator::allocate_from_driver(size_t bytes) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  void* p = nullptr;
  cudaError_t err = pooled_ ? cudaMallocFromPoolAsync(&p, bytes, pool_, stream_) : cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    if (flush_small_blocks() > 0) {  // the cached small blocks may be what the pool lacks
      if (!pooled_) check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      err = pooled_ ? cudaMallocFromPoolAsync(&p, bytes, pool_, stream_) : cudaMalloc(&p, bytes);
      if (err == cudaErrorMemoryAllocation) cudaGetLastError();
    }
  }
  if (err == cudaErrorMemoryAllocation)
    throw Unavailable("[allocator] out of GPU memory allocating " + std::to_string(bytes) + " bytes on GPU:" +
                      std::to_string(device_) + " (" + std::to_string(in_use_.load()) + " bytes in use)");
  check_cuda(err, pooled_ ? "cudaMallocFromPoolAsync" : "cudaMalloc");
  return p;
}

void CudaAllocator::free_to_driver(void* ptr) {
  // Frees must not throw (they run in tensor destructors, also at exit after CUDA has unloaded).
  ignore_cuda_error(cudaSetDevice(device_));
  if (pooled_) {
    ignore_cuda_error(cudaFreeAsync(ptr, stream_));
  } else {
    // cudaFree would synchronise the whole device anyway; waiting for our stream first makes the
    // ordering explicit.
    ignore_cuda_error(cudaStreamSynchronize(stream_));
    ignore_cuda_error(cudaFree(ptr));
  }
}

size_t CudaAllocator::flush_small_blocks() {
  std::array<std::vector<void*>, kSmallClasses> blocks;
  {
    std::lock_guard<std::mutex> lock(small_mu_);
    blocks.swap(small_free_);
    small_cached_bytes_ = 0;
  }
  size_t n = 0;
  for (auto& list : blocks)
    for (void* p : list) {
      free_to_driver(p);
      ++n;
    }
  return n;
}

void* CudaAllocator::allocate(size_t bytes) {
  const int c = small_class(bytes);  // an empty tensor gets the smallest block: a distinct pointer
  void* p = nullptr;
  if (c >= 0) {
    std::lock_guard<std::mutex> lock(small_mu_);
    if (!small_free_[c].empty()) {
      p = small_free_[c].back();
      small_free_[c].pop_back();
      small_cached_bytes_ -= static_cast<int64_t>(kSmallBlockMin << c);
    }
  }
  if (!p) p = allocate_from_driver(c >= 0 ? kSmallBlockMin << c : bytes);
  allocs_.fetch_add(1, std::memory_order_relaxed);
  int64_t now = in_use_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return p;
}

void CudaAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  const int c = small_class(bytes);
  if (c >= 0) {
    std::lock_guard<std::mutex> lock(small_mu_);
    const auto size = static_cast<int64_t>(kSmallBlockMin << c);
    if (small_cached_bytes_ + size <= kSmallCacheBytes) {
      small_free_[c].push_back(ptr);
      small_cached_bytes_ += size;
      return;
    }
  }
  free_to_driver(ptr);
}

AllocatorStats CudaAllocator::stats() const {
  AllocatorStats s;
  {
    std::lock_guard<std::mutex> lock(small_mu_);
    s.bytes_cached = small_cached_bytes_;
  }
  s.bytes_in_use = in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_.load(std::memory_order_relaxed);
  s.num_allocs = allocs_.load(std::memory_order_relaxed);
  if (pooled_) {
    uint64_t reserved = 0, used = 0;
    if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess) {
      s.bytes_cached += reserved > used ? static_cast<int64_t>(reserved - used) : 0;
    } else {
      cudaGetLastError();
    }
  }
  return s;
}

bool CudaAllocator::share_with(int peer) {
  std::lock_guard<std::mutex> lock(share_mu_);
  auto known = shared_with_.find(peer);
  if (known != shared_with_.end()) return known->second;
  int can = 0;
  // An error here is not an answer (it may be an earlier one's): asked again next time.
  if (!pooled_ || peer == device_ || cudaDeviceCanAccessPeer(&can, peer, device_) != cudaSuccess) return false;
  bool granted = false;
  if (can) {
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    granted = cudaMemPoolSetAccess(pool_, &access, 1) == cudaSuccess;
    if (!granted) cudaGetLastError();  // this call's own error: a refusal only means "through the host"
  }
  shared_with_[peer] = granted;
  return granted;
}

void CudaAllocator::reset_peak() { peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

void CudaAllocator::release_cache() {
  flush_small_blocks();
  if (!pooled_) return;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // let queued frees complete
  check_cuda(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
}

}  // namespace weft
