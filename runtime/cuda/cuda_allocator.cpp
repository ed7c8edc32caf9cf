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

void* CudaAllocator::allocate(size_t bytes) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  void* p = nullptr;
  const size_t request = bytes ? bytes : 1;  // a distinct pointer for an empty tensor
  cudaError_t err = pooled_ ? cudaMallocFromPoolAsync(&p, request, pool_, stream_) : cudaMalloc(&p, request);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw Unavailable("[allocator] out of GPU memory allocating " + std::to_string(bytes) + " bytes on GPU:" +
                      std::to_string(device_) + " (" + std::to_string(in_use_.load()) + " bytes in use)");
  }
  check_cuda(err, pooled_ ? "cudaMallocFromPoolAsync" : "cudaMalloc");
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

AllocatorStats CudaAllocator::stats() const {
  AllocatorStats s;
  s.bytes_in_use = in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_.load(std::memory_order_relaxed);
  s.num_allocs = allocs_.load(std::memory_order_relaxed);
  if (pooled_) {
    uint64_t reserved = 0, used = 0;
    if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess) {
      s.bytes_cached = reserved > used ? static_cast<int64_t>(reserved - used) : 0;
    } else {
      cudaGetLastError();
    }
  }
  return s;
}

void CudaAllocator::reset_peak() { peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

void CudaAllocator::release_cache() {
  if (!pooled_) return;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // let queued frees complete
  check_cuda(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
}

}  // namespace weft
