// Out-of-range ids met by the CUDA kernels that read ids (GatherV2, UnsortedSegmentSum), reported
// without synchronising the device on every call, as PyTorch and TensorFlow report errors found on
// a GPU: at the next point where the host waits for the device anyway.
//
// A kernel never dereferences a bad id (a gather writes zeros in its place, a segment sum skips
// its row) and records it in its device's one IndexErrorSlot: the first call, in stream order,
// that meets a bad id owns the slot, and within that call the lowest flat position wins, so the
// report names the id the CPU kernel names. The device stores numbers only; what the message needs
// besides (the op's name, the shapes, the limit) is kept on the host, per call, until a check has
// seen the call done.
//
// The slot is read where the host waits for the GPU's compute stream: Device::synchronize() and
// every download to the host (copy_to_host, so every eager read of a value; copy_to_host_async
// before its callback runs, so a fetch or a Send to the CPU). The first bad call queued before
// that point is raised there as InvalidArgument with the CPU kernel's message,
// "[GatherV2] indices[1, 0] = 5 is out of range: ...". Reporting clears the slot (in stream order),
// so the error does not reappear; calls queued before the clearing that also met bad ids are not
// reported again (their outputs hold zeros for those ids), as after any failed step.
//
//   IndexErrorRecord& errors = *cuda_context(ctx).index_errors;
//   errors.launch([=](int64_t position, int64_t value) { return "[op] ids[" + ... + "] = ..."; },
//                 [&](IndexErrorSlot* slot, uint64_t call) { kernel<<<g, b, 0, stream>>>(..., slot, call); });
//   ...
//   const uint64_t through = errors.mark();   // where the host is about to wait
//   <wait for the compute stream up to a point queued now>
//   errors.check(through);                    // throws the first bad call before `through`
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

namespace weft {

// In device memory, written by kernels (kernels/cuda/index_check.cuh) and read by the host.
struct IndexErrorSlot {
  unsigned long long call;      // 0: none; else the call that owns the slot
  unsigned long long position;  // the lowest flat position of a bad id in that call; ~0 while none
  long long value;              // the id at `position`
  int lock;                     // held while `value` is matched to `position`
  int unused;
};

class IndexErrorRecord {
 public:
  // The message of a call's first bad id, "[op] ..." in full.
  using Message = std::function<std::string(int64_t position, int64_t value)>;
  // Calls kept at most between checks: the next one waits for the device and checks first, so a
  // program that never reads a value still holds a bounded table (and meets its error).
  static constexpr size_t kMaxPending = 4096;

  // `compute` is the device's compute stream, on which every recording kernel runs.
  IndexErrorRecord(int device, cudaStream_t compute) : device_(device), compute_(compute) {}
  ~IndexErrorRecord();
  IndexErrorRecord(const IndexErrorRecord&) = delete;
  IndexErrorRecord& operator=(const IndexErrorRecord&) = delete;

  // Runs queue(slot, call), which queues on the compute stream the kernel that checks this call's
  // ids against the slot, and keeps `message` until a check sees the call done. Ticket and launch
  // are one step under the lock, so every call numbered below mark()'s answer is queued. When the
  // queue throws, the call is forgotten.
  template <class Queue>
  void launch(Message message, Queue&& queue) {
    if (pending_size() >= kMaxPending) synchronize_and_check();
    std::lock_guard<std::mutex> lock(mu_);
    IndexErrorSlot* slot = slot_locked();
    const uint64_t call = next_call_++;
    pending_.push_back({call, std::move(message)});
    try {
      queue(slot, call);
    } catch (...) {
      pending_.pop_back();
      throw;
    }
  }

  // The number of the next call: every call below it has been queued on the compute stream.
  uint64_t mark();
  // Once the host has seen the compute stream pass a point queued after mark() returned
  // `through`: throws InvalidArgument with the message of the first bad call below `through`
  // (clearing the slot), and forgets the calls below `through`. Costs nothing when no call is
  // pending; otherwise one small copy on a stream of its own. Internal on a CUDA error.
  void check(uint64_t through);
  // Waits for the compute stream, then check()s.
  void synchronize_and_check();

 private:
  struct Pending {
    uint64_t call;
    Message message;
  };
  size_t pending_size();
  IndexErrorSlot* slot_locked();  // allocated on the first call

  int device_;
  cudaStream_t compute_;
  std::mutex mu_;
  uint64_t next_call_ = 1;
  uint64_t reported_ = 0;  // the last call raised: its slot may not be cleared yet when read again
  std::deque<Pending> pending_;
  IndexErrorSlot* slot_ = nullptr;      // device memory
  IndexErrorSlot* snapshot_ = nullptr;  // pinned host memory the slot is read into
  IndexErrorSlot* clean_ = nullptr;     // pinned host memory: the empty slot, copied over it to clear
  cudaStream_t read_stream_ = nullptr;  // reads the slot without waiting for the compute stream
};

}  // namespace weft
