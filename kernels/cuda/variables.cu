// Variables on a GPU. Const, ReadVariable, ReadVariableForUpdate, AssignVariable and NoOp only
// hand buffers over, so the CPU's implementations serve CUDA too (kernels/cpu/graph.cpp, through
// variable_access.h, which moves a variable's value to the GPU the first time a kernel there
// touches it). AssignAddVariable and AssignSubVariable compute: here they update the variable's
// own GPU buffer in place on the stream (copied first only if something else holds it), for the
// dtypes the CPU has (float32, float64, int8, uint8, int32, int64). Integers wrap.
#include <cuda_runtime.h>

#include "kernels/cpu/variable_access.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_launch.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T, bool kAdd>
__global__ void update_in_place_kernel(T* __restrict__ w, const T* __restrict__ d, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const Wide<T> a = static_cast<Wide<T>>(w[i]), b = static_cast<Wide<T>>(d[i]);
    w[i] = static_cast<T>(kAdd ? a + b : a - b);
  }
}

template <class T, bool kAdd>
void assign_update(KernelContext& ctx) {
  VariableState& v = cpu::initialised(ctx);
  const Tensor& delta = ctx.input(0);
  cpu::check_same_shape(ctx, v, delta);
  T* w = static_cast<T*>(raw_data(cpu::placed_value(ctx, v, /*for_update=*/true)));
  const int64_t n = delta.size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  update_in_place_kernel<T, kAdd><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      w, static_cast<const T*>(raw_data(delta)), n);
  check_launch(ctx);
}

template <class T>
void register_update(DType dt) {
  register_kernel("AssignAddVariable", DeviceType::CUDA, dt, assign_update<T, true>);
  register_kernel("AssignSubVariable", DeviceType::CUDA, dt, assign_update<T, false>);
}

}  // namespace

void register_variable_kernels() {
  cpu::register_buffer_graph_kernels(DeviceType::CUDA);
  register_update<float>(float32);
  register_update<double>(float64);
  register_update<int8_t>(int8);
  register_update<uint8_t>(uint8);
  register_update<int32_t>(int32);
  register_update<int64_t>(int64);
}

}  // namespace weft::cuda
