#include "runtime/cuda/index_error_record.h"

#include <cstring>
#include <string>

#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace weft {

namespace {

constexpr IndexErrorSlot kEmptySlot{0, ~0ull, 0, 0, 0};

}  // namespace

IndexErrorRecord::~IndexErrorRecord() {
  ignore_cuda_error(cudaSetDevice(device_));
  if (read_stream_) ignore_cuda_error(cudaStreamDestroy(read_stream_));
  if (slot_) ignore_cuda_error(cudaFree(slot_));
  if (snapshot_) ignore_cuda_error(cudaFreeHost(snapshot_));
  if (clean_) ignore_cuda_error(cudaFreeHost(clean_));
}

size_t IndexErrorRecord::pending_size() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

IndexErrorSlot* IndexErrorRecord::slot_locked() {
  if (slot_) return slot_;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  // Outside the stream-ordered pool, like the other per-device words: never freed while the device
  // is in use, so no stream ordering to keep. A failure part way leaves the members set so far,
  // which the destructor frees and the next call does not allocate again.
  if (!snapshot_) {
    void* host = nullptr;
    check_cuda(cudaMallocHost(&host, sizeof(IndexErrorSlot)), "cudaMallocHost(index error snapshot)");
    snapshot_ = static_cast<IndexErrorSlot*>(host);
  }
  if (!clean_) {
    void* host = nullptr;
    check_cuda(cudaMallocHost(&host, sizeof(IndexErrorSlot)), "cudaMallocHost(empty index error slot)");
    clean_ = static_cast<IndexErrorSlot*>(host);
    std::memcpy(clean_, &kEmptySlot, sizeof kEmptySlot);
  }
  if (!read_stream_) {
    // Non-blocking: the read must not wait for the legacy default stream's users either.
    check_cuda(cudaStreamCreateWithFlags(&read_stream_, cudaStreamNonBlocking), "cudaStreamCreate(index errors)");
  }
  void* word = nullptr;
  check_cuda(cudaMalloc(&word, sizeof(IndexErrorSlot)), "cudaMalloc(index error slot)");
  auto* slot = static_cast<IndexErrorSlot*>(word);
  const cudaError_t err = cudaMemcpy(slot, clean_, sizeof(IndexErrorSlot), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) ignore_cuda_error(cudaFree(slot));
  check_cuda(err, "clear index error slot");
  slot_ = slot;
  return slot_;
}

uint64_t IndexErrorRecord::mark() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_call_;
}

void IndexErrorRecord::check(uint64_t through) {
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty() || pending_.front().call >= through) return;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    // On a stream of its own: the calls below `through` are done, and whatever later kernels are
    // doing to the slot meanwhile is ignored below (their call is `through` or later).
    check_cuda(cudaMemcpyAsync(snapshot_, slot_, sizeof(IndexErrorSlot), cudaMemcpyDeviceToHost, read_stream_),
               "read index error slot");
    check_cuda(cudaStreamSynchronize(read_stream_), "cudaStreamSynchronize(index errors)");
    const IndexErrorSlot s = *snapshot_;
    if (s.call != 0 && s.call < through && s.call > reported_) {
      for (const Pending& p : pending_) {
        if (p.call != s.call) continue;
        error = p.message(static_cast<int64_t>(s.position), static_cast<int64_t>(s.value));
        break;
      }
      if (error.empty())  // cannot happen: a call is forgotten only once seen done
        error = "[cuda] an id out of range at position " + std::to_string(s.position) + " (value " +
                std::to_string(s.value) + ") of an op whose details were not kept";
      reported_ = s.call;
      // In stream order, after every kernel queued so far: none of them writes the slot meanwhile.
      check_cuda(cudaMemcpyAsync(slot_, clean_, sizeof(IndexErrorSlot), cudaMemcpyHostToDevice, compute_),
                 "clear index error slot");
    }
    while (!pending_.empty() && pending_.front().call < through) pending_.pop_front();
  }
  if (!error.empty()) throw InvalidArgument(error);
}

void IndexErrorRecord::synchronize_and_check() {
  const uint64_t through = mark();
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_cuda(cudaStreamSynchronize(compute_), "cudaStreamSynchronize(compute)");
  check(through);
}

}  // namespace weft
