// Turning CUDA runtime errors into weft errors. Every CUDA call in weft goes through one of these:
// a failed call must never be ignored, because the next unrelated call would report it instead.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "runtime/error.h"

namespace weft {

// Throws Internal("[cuda] what: <CUDA's message>") unless err is cudaSuccess.
inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so that it is not reported again by a later call
    throw Internal(std::string("[cuda] ") + what + ": " + cudaGetErrorString(err));
  }
}

// For destructors and deallocation, which must not throw: the error is cleared and dropped. At
// process exit the CUDA runtime may already be unloaded (cudaErrorCudartUnloading), which is fine.
inline void ignore_cuda_error(cudaError_t err) {
  if (err != cudaSuccess) cudaGetLastError();
}

}  // namespace weft
