// Plain CUDA launches for bench/gpu.cpp's eager breakdown (gpu_raw_launch.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace weft::bench {

// One launch of an empty kernel (1 block, 1 thread).
void raw_empty_launch(cudaStream_t stream);
// sum = a + b, then out = relu(sum): two launches, n floats each, every buffer on the GPU.
void raw_add_relu(const float* a, const float* b, float* sum, float* out, int64_t n, cudaStream_t stream);

}  // namespace weft::bench
