// WEFT_HOST_DEVICE marks a function compiled both for the host and, under nvcc, for CUDA devices:
// the code the CPU and CUDA kernels share (philox.h, shared_elementwise_ops.h).
#pragma once

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif
