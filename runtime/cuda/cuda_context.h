// What a CUDA kernel needs from its device, typed: the compute stream, a cuBLASLt handle and its
// workspace, a word on the GPU through which kernels report bad data at once, and the record of
// out-of-range ids reported at the next synchronisation. Usable from .cu and .cpp.
//
//   void add_f32(KernelContext& ctx) {
//     CudaContext& cu = cuda_context(ctx);       // also makes ctx's GPU this thread's current one
//     my_kernel<<<blocks, threads, 0, cu.stream>>>(...);
//     check_launch(ctx);
//   }
//
// Everything a kernel queues goes on `stream`, the stream the allocator orders its blocks on, so
// inputs are ready and outputs may be freed without any synchronisation.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace weft {

class Device;
struct KernelContext;
class IndexErrorRecord;

struct CudaContext {
  cudaStream_t stream = nullptr;   // the device's compute stream
  cublasLtHandle_t lt = nullptr;   // created with the context, on the first kernel of the device
  void* workspace = nullptr;       // cuBLASLt workspace, workspace_bytes long, on this device
  size_t workspace_bytes = 0;
  int device = 0;                  // CUDA device ordinal
  int sm_count = 0;

  // Kernels that can meet data they must refuse (an integer division by zero) store a nonzero
  // code in *error_word; read_error_word() fetches and clears it. error_mu keeps one kernel's
  // clear-launch-read sequence from interleaving with another thread's on the same stream.
  int32_t* error_word = nullptr;   // device memory, 4 bytes
  int32_t* error_host = nullptr;   // pinned host memory, 4 bytes
  std::mutex error_mu;

  // Where the kernels that read ids (GatherV2, UnsortedSegmentSum) record a bad one without
  // waiting for the stream; raised at the device's next synchronisation
  // (runtime/cuda/index_error_record.h). Not owned: the device's.
  IndexErrorRecord* index_errors = nullptr;
};

inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

// The context of a CUDA device, created on first use. Makes the device current on this thread
// (kernels may run on any executor thread). FailedPrecondition when `device` is not a GPU.
CudaContext& cuda_context(Device& device);
CudaContext& cuda_context(const KernelContext& ctx);

// Waits for the stream and returns the code kernels stored in error_word since the last call (0:
// none), clearing it. The caller holds error_mu. Internal on a CUDA error.
int32_t read_error_word(CudaContext& cu);
// Queues the clearing of error_word on the stream; the caller holds error_mu.
void clear_error_word(CudaContext& cu);

// Throws Internal("[op] CUDA kernel launch failed: ...") when the last launch on this thread failed.
void check_launch(const KernelContext& ctx);

}  // namespace weft
