#include "runtime/cuda/cuda_copy_engine.h"

#include <algorithm>
#include <cstring>
#include <future>

#include "runtime/cuda/cuda_check.h"

namespace weft {

namespace {

cudaEvent_t ordering_event() {
  cudaEvent_t e = nullptr;
  // Timing off: these events only order streams, and untimed events are cheaper to record and wait.
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

}  // namespace

// One download_async: its chunks are queued a few at a time, the next ones from the callbacks of
// the earlier ones. Guarded by the engine's mu_.
struct CudaCopyEngine::Download {
  const char* src;
  char* dst;
  size_t bytes;
  Done done;
  size_t queued = 0;  // bytes whose chunks have been queued
  int in_flight = 0;
  std::exception_ptr error;
};

CudaCopyEngine::CudaCopyEngine(int device, cudaStream_t compute) : device_(device), compute_(compute), waiter_(device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate(copy)");
  compute_done_ = ordering_event();
  copy_done_ = ordering_event();
}

CudaCopyEngine::~CudaCopyEngine() {
  ignore_cuda_error(cudaSetDevice(device_));
  if (copy_) ignore_cuda_error(cudaStreamSynchronize(copy_));
  if (compute_done_) ignore_cuda_error(cudaEventDestroy(compute_done_));
  if (copy_done_) ignore_cuda_error(cudaEventDestroy(copy_done_));
  if (copy_) ignore_cuda_error(cudaStreamDestroy(copy_));
}

void CudaCopyEngine::order_after_compute() {
  check_cuda(cudaEventRecord(compute_done_, compute_), "cudaEventRecord(compute)");
  check_cuda(cudaStreamWaitEvent(copy_, compute_done_, 0), "cudaStreamWaitEvent(copy after compute)");
}

void CudaCopyEngine::upload(const void* host_src, void* device_dst, size_t bytes) {
  if (bytes == 0) return;
  const auto* src = static_cast<const char*>(host_src);
  auto* dst = static_cast<char*>(device_dst);
  std::lock_guard<std::mutex> lock(mu_);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  // Also for uploads: the destination was allocated in order on the compute stream, and earlier
  // kernels may still be reading what it held before.
  order_after_compute();
  for (size_t off = 0; off < bytes; off += kChunkBytes) {
    const size_t len = std::min(kChunkBytes, bytes - off);
    PinnedStagingPool::Block block = staging_.acquire(len);
    std::memcpy(block.data, src + off, len);
    const cudaError_t err = cudaMemcpyAsync(dst + off, block.data, len, cudaMemcpyHostToDevice, copy_);
    if (err != cudaSuccess) staging_.release(block);
    check_cuda(err, "copy from host");
    // The block goes back to the pool once its DMA has read it.
    cudaEvent_t read = waiter_.event();
    check_cuda(cudaEventRecord(read, copy_), "cudaEventRecord(staging)");
    waiter_.when_done(read, [this, block](std::exception_ptr) { staging_.release(block); });
  }
  check_cuda(cudaEventRecord(copy_done_, copy_), "cudaEventRecord(copy)");
  check_cuda(cudaStreamWaitEvent(compute_, copy_done_, 0), "cudaStreamWaitEvent(compute after copy)");
}

void CudaCopyEngine::download(const void* device_src, void* host_dst, size_t bytes) {
  if (bytes == 0) return;
  const auto* src = static_cast<const char*>(device_src);
  auto* dst = static_cast<char*>(host_dst);
  // Two staging blocks, each with its own event: the host drains chunk c - 1 while chunk c is in
  // flight. Waited for here, so this never depends on the waiter's thread.
  struct Slot {
    PinnedStagingPool::Block block;
    cudaEvent_t filled = nullptr;
  } slots[2];
  struct Cleanup {
    PinnedStagingPool& pool;
    Slot* slots;
    ~Cleanup() {
      for (int i = 0; i < 2; ++i) {
        if (slots[i].filled) {
          ignore_cuda_error(cudaEventSynchronize(slots[i].filled));
          ignore_cuda_error(cudaEventDestroy(slots[i].filled));
        }
        pool.release(slots[i].block);
      }
    }
  } cleanup{staging_, slots};
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  {
    // Only the wait for compute needs the lock: the chunks queued after it on the copy stream
    // follow it whatever other threads queue in between.
    std::lock_guard<std::mutex> lock(mu_);
    order_after_compute();
  }
  const size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto drain = [&](size_t c) {
    const size_t off = c * kChunkBytes, len = std::min(kChunkBytes, bytes - off);
    check_cuda(cudaEventSynchronize(slots[c % 2].filled), "cudaEventSynchronize(staging)");
    std::memcpy(dst + off, slots[c % 2].block.data, len);
  };
  // Slot c % 2 is refilled by chunk c + 2 only after drain(c), one iteration earlier.
  for (size_t c = 0; c < chunks; ++c) {
    const size_t off = c * kChunkBytes, len = std::min(kChunkBytes, bytes - off);
    Slot& s = slots[c % 2];
    if (!s.block.data) {
      s.block = staging_.acquire(chunks == 1 ? len : kChunkBytes);
      s.filled = ordering_event();
    }
    check_cuda(cudaMemcpyAsync(s.block.data, src + off, len, cudaMemcpyDeviceToHost, copy_), "copy to host");
    check_cuda(cudaEventRecord(s.filled, copy_), "cudaEventRecord(staging)");
    if (c > 0) drain(c - 1);
  }
  drain(chunks - 1);
}

void CudaCopyEngine::when_reached(cudaStream_t stream, Done then) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  cudaEvent_t reached = waiter_.event();
  const cudaError_t err = cudaEventRecord(reached, stream);
  if (err != cudaSuccess) {
    waiter_.when_done(reached, [](std::exception_ptr) {});  // hands the event back; it is not pending
    check_cuda(err, "cudaEventRecord(reached)");
  }
  waiter_.when_done(reached, std::move(then));
}

void CudaCopyEngine::download_async(const void* device_src, void* host_dst, size_t bytes, Done done) {
  if (bytes == 0) {
    done(nullptr);
    return;
  }
  auto d = std::make_shared<Download>(
      Download{static_cast<const char*>(device_src), static_cast<char*>(host_dst), bytes, std::move(done)});
  bool failed_at_once = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      check_cuda(cudaSetDevice(device_), "cudaSetDevice");
      order_after_compute();
      queue_download_chunks(d);
    } catch (...) {
      d->error = std::current_exception();
      failed_at_once = d->in_flight == 0;  // else the last chunk's callback reports it
    }
  }
  if (failed_at_once) d->done(d->error);
}

void CudaCopyEngine::queue_download_chunks(const std::shared_ptr<Download>& d) {
  while (!d->error && d->queued < d->bytes && d->in_flight < kDownloadChunksInFlight) {
    const size_t off = d->queued, len = std::min(kChunkBytes, d->bytes - off);
    PinnedStagingPool::Block block = staging_.acquire(len);
    cudaError_t err = cudaMemcpyAsync(block.data, d->src + off, len, cudaMemcpyDeviceToHost, copy_);
    cudaEvent_t filled = nullptr;
    if (err == cudaSuccess) {
      filled = waiter_.event();
      err = cudaEventRecord(filled, copy_);
    }
    if (err != cudaSuccess) staging_.release(block);
    check_cuda(err, "copy to host");
    d->queued += len;
    ++d->in_flight;
    waiter_.when_done(filled, [this, d, block, off, len](std::exception_ptr error) {
      finish_download_chunk(d, block, off, len, std::move(error));
    });
  }
}

void CudaCopyEngine::finish_download_chunk(const std::shared_ptr<Download>& d, PinnedStagingPool::Block block,
                                           size_t offset, size_t len, std::exception_ptr error) {
  if (!error) std::memcpy(d->dst + offset, block.data, len);
  staging_.release(block);
  bool finished = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error && !d->error) d->error = error;
    --d->in_flight;
    if (!d->error) {
      try {
        // Later chunks follow on the copy stream, still after the compute work the first waited for.
        check_cuda(cudaSetDevice(device_), "cudaSetDevice");
        queue_download_chunks(d);
      } catch (...) {
        d->error = std::current_exception();
      }
    }
    finished = d->in_flight == 0 && (d->error || d->queued == d->bytes);
  }
  if (finished) d->done(d->error);
}

}  // namespace weft
