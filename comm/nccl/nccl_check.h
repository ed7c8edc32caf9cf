// Small helpers both NCCL users share (nccl_collectives.cpp, nccl_p2p.cpp): NCCL's error text with
// the communicator's last message, and the CUDA events they record on their streams.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

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

}  // namespace weft
