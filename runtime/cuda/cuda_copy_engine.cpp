#include "runtime/cuda/cuda_copy_engine.h"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/cuda_check.h"

namespace weft {

CudaCopyEngine::CudaCopyEngine(int device, cudaStream_t compute) : device_(device), compute_(compute) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate(copy)");
  // Timing off: these events only order work, and untimed events are cheaper to record and wait.
  check_cuda(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), "cudaEventCreate");
  for (cudaEvent_t& e : staged_) check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
}

CudaCopyEngine::~CudaCopyEngine() {
  ignore_cuda_error(cudaSetDevice(device_));
  for (void* p : staging_)
    if (p) ignore_cuda_error(cudaFreeHost(p));
  for (cudaEvent_t e : staged_)
    if (e) ignore_cuda_error(cudaEventDestroy(e));
  if (compute_done_) ignore_cuda_error(cudaEventDestroy(compute_done_));
  if (copy_) ignore_cuda_error(cudaStreamDestroy(copy_));
}

void CudaCopyEngine::wait_for_compute() {
  check_cuda(cudaEventRecord(compute_done_, compute_), "cudaEventRecord(compute)");
  check_cuda(cudaStreamWaitEvent(copy_, compute_done_, 0), "cudaStreamWaitEvent(copy after compute)");
}

void CudaCopyEngine::ensure_staging() {
  for (void*& p : staging_)
    if (!p) check_cuda(cudaMallocHost(&p, kChunkBytes), "cudaMallocHost(staging)");
}

bool CudaCopyEngine::is_pinned(const void* host) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, host) != cudaSuccess) {
    cudaGetLastError();  // an unknown pointer is pageable memory
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

void CudaCopyEngine::to_host(const void* device_src, void* host_dst, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  wait_for_compute();
  if (is_pinned(host_dst)) {
    check_cuda(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, copy_), "copy to host");
    check_cuda(cudaStreamSynchronize(copy_), "cudaStreamSynchronize(copy)");
    return;
  }
  ensure_staging();
  const auto* src = static_cast<const char*>(device_src);
  auto* dst = static_cast<char*>(host_dst);
  const size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  // Chunk c lands in staging_[c % 2]; the host drains chunk c - 1 while chunk c is in flight. A
  // buffer is refilled (chunk c + 1) only after the host drained it (chunk c - 1).
  auto drain = [&](size_t c) {
    const size_t off = c * kChunkBytes, len = std::min(kChunkBytes, bytes - off);
    check_cuda(cudaEventSynchronize(staged_[c % 2]), "cudaEventSynchronize(staging)");
    std::memcpy(dst + off, staging_[c % 2], len);
  };
  for (size_t c = 0; c < chunks; ++c) {
    const size_t off = c * kChunkBytes, len = std::min(kChunkBytes, bytes - off);
    check_cuda(cudaMemcpyAsync(staging_[c % 2], src + off, len, cudaMemcpyDeviceToHost, copy_), "copy to host");
    check_cuda(cudaEventRecord(staged_[c % 2], copy_), "cudaEventRecord(staging)");
    if (c > 0) drain(c - 1);
  }
  drain(chunks - 1);
}

void CudaCopyEngine::from_host(const void* host_src, void* device_dst, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  // Also for uploads: the destination was allocated in order on the compute stream, and earlier
  // kernels may still be reading what it held before.
  wait_for_compute();
  if (is_pinned(host_src)) {
    check_cuda(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, copy_), "copy from host");
    check_cuda(cudaStreamSynchronize(copy_), "cudaStreamSynchronize(copy)");
    return;
  }
  ensure_staging();
  const auto* src = static_cast<const char*>(host_src);
  auto* dst = static_cast<char*>(device_dst);
  // staged_[i] recorded after the DMA out of staging_[i]: it must complete before the host refills it.
  bool used[2] = {false, false};
  for (size_t off = 0, c = 0; off < bytes; off += kChunkBytes, ++c) {
    const size_t len = std::min(kChunkBytes, bytes - off);
    const size_t b = c % 2;
    if (used[b]) check_cuda(cudaEventSynchronize(staged_[b]), "cudaEventSynchronize(staging)");
    std::memcpy(staging_[b], src + off, len);
    check_cuda(cudaMemcpyAsync(dst + off, staging_[b], len, cudaMemcpyHostToDevice, copy_), "copy from host");
    check_cuda(cudaEventRecord(staged_[b], copy_), "cudaEventRecord(staging)");
    used[b] = true;
  }
  check_cuda(cudaStreamSynchronize(copy_), "cudaStreamSynchronize(copy)");
}

}  // namespace weft
