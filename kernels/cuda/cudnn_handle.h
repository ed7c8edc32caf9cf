// cuDNN's handle and error check, shared by the kernels that call cuDNN (cuda/conv.cpp, and the
// fused attention through cuDNN's frontend, cuda/attention_cudnn.cpp).
#pragma once

#include <cudnn.h>

#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

// Internal naming the op and the cuDNN call unless `status` is success.
void check_dnn(cudnnStatus_t status, const KernelContext& ctx, const char* what);

// One handle per (thread, GPU), bound to the device's stream: a cuDNN handle must not be used by
// two threads at once, and kernels run on any executor thread. Handles are kept until the process
// ends, never destroyed from a thread-exit destructor that may run after the CUDA runtime is gone.
cudnnHandle_t dnn_handle(const KernelContext& ctx, CudaContext& cu);

}  // namespace weft::cuda
