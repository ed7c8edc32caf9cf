// The floor under an eager GPU op, for bench/gpu.cpp's breakdown: relu(a + b) as two plain CUDA
// kernels launched with <<<>>> into buffers allocated once, with none of weft's dispatch,
// allocation or checks. weft's eager call minus this is what weft adds per call.
#include <cuda_runtime.h>

#include <cstdint>

#include "bench/gpu_raw_launch.h"

namespace weft::bench {

namespace {

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];
}

__global__ void empty_kernel() {}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void raw_empty_launch(cudaStream_t stream) { empty_kernel<<<1, 1, 0, stream>>>(); }

void raw_add_relu(const float* a, const float* b, float* sum, float* out, int64_t n, cudaStream_t stream) {
  add_kernel<<<blocks_for(n), 256, 0, stream>>>(a, b, sum, n);
  relu_kernel<<<blocks_for(n), 256, 0, stream>>>(sum, out, n);
}

}  // namespace weft::bench
