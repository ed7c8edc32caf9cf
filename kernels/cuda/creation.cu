// CUDA kernels of the ops that make or stretch tensors, with the CPU kernels' semantics
// (kernels/cpu/creation.cpp, kernels/cpu/broadcast.cpp):
//   Fill: every element is the scalar input (read on the GPU, never brought to the host);
//   Range: start + i * delta in double, then converted, as on the CPU (no fused multiply-add);
//   BroadcastTo, BroadcastLike: the elementwise broadcast launcher with a bit copy;
//   Size: computed from the input's shape on the host (the data is never read), then written to
//     the GPU output by a one-thread kernel, which keeps it on the stream without a host copy.
#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/half.h"

namespace weft::cuda {

namespace {

template <class W>
__global__ void fill_from_device_kernel(W* __restrict__ out, const W* __restrict__ value, int64_t n) {
  const W v = *value;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = v;
}

template <class W>
__global__ void store_value_kernel(W* out, W value) { *out = value; }

void fill(KernelContext& ctx) {
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  visit_width(ctx.output(0), [&](auto w) {
    using W = decltype(w);
    fill_from_device_kernel<W><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<W>(ctx), in_data<W>(ctx, 0), n);
  });
  check_launch(ctx);
}

template <class T>
__global__ void range_kernel(T* __restrict__ out, int64_t n, double start, double delta) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), delta)));  // two roundings, as on x86-64
}

template <class T>
void range(KernelContext& ctx) {
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  range_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<T>(ctx), n, ctx.attrs.get<double>("start"),
                                                         ctx.attrs.get<double>("delta"));
  check_launch(ctx);
}

struct BitCopy {
  template <class W>
  __device__ W operator()(W v) const { return v; }
};

void broadcast_to(KernelContext& ctx) {
  visit_width(ctx.input(0), [&](auto w) {
    using W = decltype(w);
    launch_elementwise(ctx, BitCopy{}, out_data<W>(ctx), in_data<W>(ctx, 0));
  });
}

// The element count as the output dtype, converted on the host exactly as the CPU kernel does.
void size(KernelContext& ctx) {
  const int64_t n = ctx.input(0).size();
  visit_dtype(ctx.output(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    T value;
    if constexpr (std::is_arithmetic_v<T>) value = static_cast<T>(n);
    else if constexpr (std::is_same_v<T, Half>) value = float_to_half(static_cast<float>(n));
    else value = float_to_bfloat16(static_cast<float>(n));
    cpu::visit_element_width(sizeof(T), [&](auto w) {
      using W = decltype(w);
      W bits;
      std::memcpy(&bits, &value, sizeof(W));
      store_value_kernel<W><<<1, 1, 0, cuda_context(ctx).stream>>>(out_data<W>(ctx), bits);
    });
  });
  check_launch(ctx);
}

}  // namespace

void register_creation_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    register_kernel("Fill", DeviceType::CUDA, dt, fill);
    // BroadcastLike differs only in where the target shape comes from: the output already has it.
    register_kernel("BroadcastTo", DeviceType::CUDA, dt, broadcast_to);
    register_kernel("BroadcastLike", DeviceType::CUDA, dt, broadcast_to);
    if (dt != DType::Bool) register_kernel("Size", DeviceType::CUDA, dt, size);
  }
  register_kernel("Range", DeviceType::CUDA, float32, range<float>);
  register_kernel("Range", DeviceType::CUDA, float64, range<double>);
  register_kernel("Range", DeviceType::CUDA, int32, range<int32_t>);
  register_kernel("Range", DeviceType::CUDA, int64, range<int64_t>);
}

}  // namespace weft::cuda
