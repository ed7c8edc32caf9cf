// Copies between host memory and one GPU, on a stream of their own, through pinned staging
// blocks (runtime/cuda/pinned_staging_pool.h) in chunks, so the host's memcpy of one chunk
// overlaps the DMA of another.
//
// Ordering: every copy first waits (through an event, on the GPU) for the work already queued on
// the compute stream, so it sees what earlier kernels wrote and never touches a block before its
// stream-ordered allocation. An upload then makes the compute stream wait for it, so the kernels
// queued after it read the new bytes, and the host does not wait for the DMA at all.
//
//   engine.upload(host, dev, n);                     // host may be reused on return
//   engine.download(dev, host, n);                   // host holds the bytes on return
//   engine.download_async(dev, host, n, [](std::exception_ptr e) { ... });  // on the waiter's thread
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "runtime/cuda/cuda_event_waiter.h"
#include "runtime/cuda/pinned_staging_pool.h"

namespace weft {

class CudaCopyEngine {
 public:
  using Done = std::function<void(std::exception_ptr error)>;
  static constexpr size_t kChunkBytes = PinnedStagingPool::kChunkBytes;
  // Chunks of one download in flight at once: enough to keep the DMA engine busy while the host
  // drains the previous chunk, and a bound on the staging memory one download holds.
  static constexpr int kDownloadChunksInFlight = 3;

  // `compute` is the device's compute stream; it outlives the engine.
  CudaCopyEngine(int device, cudaStream_t compute);
  ~CudaCopyEngine();
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  // Queues host -> device, ordered before everything queued on the compute stream afterwards.
  // Returns once `host_src` has been read. Internal on a CUDA error.
  void upload(const void* host_src, void* device_dst, size_t bytes);
  // Device -> host; returns when `host_dst` holds the bytes. Internal on a CUDA error. Waits on
  // the calling thread (never on the waiter's, so any thread may call it, the waiter's included).
  void download(const void* device_src, void* host_dst, size_t bytes);
  // Device -> host without holding the caller: returns at once, and `done` runs on the waiter's
  // thread once `host_dst` holds the bytes (null) or a copy failed (Internal). Both buffers must
  // stay alive until then. `done` runs exactly once, inline when nothing could be queued.
  void download_async(const void* device_src, void* host_dst, size_t bytes, Done done);
  // `then` runs on the waiter's thread once the work queued so far on `stream` (a stream of this
  // engine's GPU) has run: how a caller holds what that work reads without any stream waiting.
  // Internal when the event cannot be recorded (then `then` does not run).
  void when_reached(cudaStream_t stream, Done then);

 private:
  struct Download;
  void order_after_compute();  // the copy stream waits for everything queued on compute so far
  // Queues chunks of `d` until kDownloadChunksInFlight are on the way; the caller holds mu_.
  void queue_download_chunks(const std::shared_ptr<Download>& d);
  void finish_download_chunk(const std::shared_ptr<Download>& d, PinnedStagingPool::Block block, size_t offset,
                             size_t len, std::exception_ptr error);

  int device_;
  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;  // recorded on compute, waited by copy
  cudaEvent_t copy_done_ = nullptr;     // recorded on copy after an upload, waited by compute
  std::mutex mu_;  // one thread queues copies at a time: the two events above are shared
  PinnedStagingPool staging_;
  CudaEventWaiter waiter_;  // last: its thread stops (running queued callbacks) before the rest goes
};

}  // namespace weft
