#include "kernels/cuda/cudnn_handle.h"

#include <string>
#include <unordered_map>

#include "runtime/error.h"

namespace weft::cuda {

void check_dnn(cudnnStatus_t status, const KernelContext& ctx, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Internal("[" + ctx.op.display + "] cuDNN " + what + " failed: " + cudnnGetErrorString(status));
}

cudnnHandle_t dnn_handle(const KernelContext& ctx, CudaContext& cu) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  cudnnHandle_t& h = handles[cu.device];
  if (!h) check_dnn(cudnnCreate(&h), ctx, "cudnnCreate");
  check_dnn(cudnnSetStream(h, cu.stream), ctx, "cudnnSetStream");
  return h;
}

}  // namespace weft::cuda
