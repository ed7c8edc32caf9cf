// Copies between host memory and one GPU, on a stream of their own.
//
// A copy waits (through an event, on the GPU) for the work already queued on the compute stream,
// so it sees what earlier kernels wrote and never touches a block before its stream-ordered
// allocation; the host then waits for the copy itself, which keeps Device's copies synchronous.
// Host memory that is not pinned (every CPU tensor) goes through two pinned staging buffers in
// chunks, so the host's memcpy of one chunk overlaps the DMA of the other, instead of the driver's
// own slower staging. Pinned host memory is copied directly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace weft {

class CudaCopyEngine {
 public:
  static constexpr size_t kChunkBytes = size_t{4} << 20;

  // `compute` is the device's compute stream; it outlives the engine.
  CudaCopyEngine(int device, cudaStream_t compute);
  ~CudaCopyEngine();
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  // Synchronous: on return the bytes are in place. Internal on a CUDA error.
  void to_host(const void* device_src, void* host_dst, size_t bytes);
  void from_host(const void* host_src, void* device_dst, size_t bytes);

  cudaStream_t stream() const { return copy_; }

 private:
  void wait_for_compute();     // the copy stream waits for everything queued on compute so far
  void ensure_staging();       // allocates the pinned buffers on first use
  static bool is_pinned(const void* host);

  int device_;
  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  std::mutex mu_;  // one copy at a time: they share the staging buffers and events
  void* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staged_[2] = {nullptr, nullptr};  // chunk in staging_[i] finished copying
};

}  // namespace weft
