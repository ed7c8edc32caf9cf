// CUDA kernels for the elementwise ops that are the same shape on both sides. They keep the CUDA
// build honest from the start; broadcasting and the other families follow in the GPU issue.
#include <cuda_runtime.h>

#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

namespace {

__global__ void add_f32(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void relu_f32(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[i] > 0.f ? x[i] : 0.f;
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

void check_launch(KernelContext& ctx) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw Internal("[" + ctx.op.display + "] CUDA launch failed: " + cudaGetErrorString(err));
}

void add_kernel(KernelContext& ctx) {
  int64_t n = ctx.output(0).size();
  if (ctx.input(0).size() != n || ctx.input(1).size() != n)
    ctx.fail("the GPU kernel needs operands of one shape; got " + ctx.input(0).shape().to_string() + " and " +
             ctx.input(1).shape().to_string());
  auto stream = static_cast<cudaStream_t>(ctx.device.stream());
  add_f32<<<blocks_for(n), 256, 0, stream>>>(static_cast<const float*>(ctx.input(0).raw_data()),
                                              static_cast<const float*>(ctx.input(1).raw_data()),
                                              static_cast<float*>(ctx.output(0).raw_data()), n);
  check_launch(ctx);
}

void relu_kernel(KernelContext& ctx) {
  int64_t n = ctx.output(0).size();
  auto stream = static_cast<cudaStream_t>(ctx.device.stream());
  relu_f32<<<blocks_for(n), 256, 0, stream>>>(static_cast<const float*>(ctx.input(0).raw_data()),
                                               static_cast<float*>(ctx.output(0).raw_data()), n);
  check_launch(ctx);
}

}  // namespace

void register_cuda_kernels() {
  register_kernel("Add", DeviceType::CUDA, float32, add_kernel);
  if (op_registry().find("Relu")) register_kernel("Relu", DeviceType::CUDA, float32, relu_kernel);
}

}  // namespace weft::cuda
