// Small helpers both NCCL users share (nccl_collectives.cpp, nccl_p2p.cpp): NCCL's error text with
// the communicator's last message, the CUDA events they record on their streams, and the two
// questions their watchdog (nccl_watchdog.h) asks of a communicator and of an event.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <utility>

#include "comm/nccl/nccl_watchdog.h"

#include "runtime/cuda/cuda_check.h"

namespace weft {

inline std::string nccl_message(ncclResult_t r, ncclComm_t comm) {
  std::string m = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) m += std::string(" (") + last + ")";
  return m;
}

// An event for ordering and completion only (no timing: cheaper to record and query).
inline cudaEvent_t new_nccl_event() {
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate(nccl)");
  return e;
}

// The two events of one NCCL launch: `ready` recorded on the compute stream where its tensors were
// made (or allocated), which the NCCL stream waits for; `finished` recorded on the NCCL stream
// after the launch, which says when it completed. Made on the current device.
struct NcclEvents {
  cudaEvent_t ready = nullptr;
  cudaEvent_t finished = nullptr;
  NcclEvents() {
    ready = new_nccl_event();
    try {
      finished = new_nccl_event();
    } catch (...) {
      ignore_cuda_error(cudaEventDestroy(ready));
      throw;
    }
  }
  NcclEvents(NcclEvents&& o) noexcept : ready(std::exchange(o.ready, nullptr)), finished(std::exchange(o.finished, nullptr)) {}
  NcclEvents(const NcclEvents&) = delete;
  NcclEvents& operator=(const NcclEvents&) = delete;
  NcclEvents& operator=(NcclEvents&&) = delete;
  ~NcclEvents() {
    if (ready) ignore_cuda_error(cudaEventDestroy(ready));
    if (finished) ignore_cuda_error(cudaEventDestroy(finished));
  }
};

// ncclCommGetAsyncError of `comm` (null: aborted, a failure). The caller serialises calls on it.
inline NcclPoll poll_nccl_comm(ncclComm_t comm) {
  if (!comm) return NcclPoll::failed("the communicator was aborted");
  ncclResult_t r = ncclInternalError;
  if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) r = ncclInternalError;
  if (r == ncclSuccess) return NcclPoll::ready();
  if (r == ncclInProgress) return NcclPoll::pending();
  return NcclPoll::failed(nccl_message(r, nullptr));
}

// Whether the work before `event` on its stream is done; a CUDA error is cleared, so that no later
// call reports it.
inline NcclPoll poll_nccl_event(cudaEvent_t event) {
  const cudaError_t q = cudaEventQuery(event);
  if (q == cudaSuccess) return NcclPoll::ready();
  if (q == cudaErrorNotReady) return NcclPoll::pending();
  cudaGetLastError();
  return NcclPoll::failed(cudaGetErrorString(q));
}

}  // namespace weft
