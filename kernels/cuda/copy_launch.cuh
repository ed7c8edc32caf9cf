// Shared by the CUDA data-movement kernels (transpose.cu, array.cu, pad.cu, scatter.cu,
// creation.cu): copies typed by element width only (a float and an int32 move alike, so each
// kernel is compiled for four widths instead of nine dtypes), the strided gather of
// copy_geometry.h, and plain device-to-device copies. Index tensors are checked by the kernels
// that read them (index_check.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/copy_util.h"
#include "kernels/cuda/copy_geometry.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_launch.cuh"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/device.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

// Calls f(W{}) with an unsigned integer type exactly one element of `t` wide.
template <class F>
decltype(auto) visit_width(const Tensor& t, F&& f) {
  return cpu::visit_element_width(dtype_size(t.dtype()), std::forward<F>(f));
}

template <class W>
W* out_data(const KernelContext& ctx, int i = 0) { return static_cast<W*>(raw_data(ctx.output(i))); }
template <class W>
const W* in_data(const KernelContext& ctx, int i) { return static_cast<const W*>(raw_data(ctx.input(i))); }

// Index is int32_t when g.index32, else int64_t.
template <class W, class Index>
__global__ void strided_copy_kernel(W* __restrict__ out, const W* __restrict__ in, StridedCopy g) {
  const Index n = static_cast<Index>(g.n);
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    Index rem = i, off = static_cast<Index>(g.base);
    for (int d = g.rank - 1; d >= 0; --d) {
      const Index dim = static_cast<Index>(g.dims[d]);
      const Index q = rem / dim;
      off += (rem - q * dim) * static_cast<Index>(g.in_strides[d]);
      rem = q;
    }
    out[i] = in[off];
  }
}

// out[i] = in[strided_offset(g, i)] on ctx's stream, for elements `W` wide.
template <class W>
void launch_strided_copy(const KernelContext& ctx, const StridedCopy& g, W* out, const W* in) {
  if (g.n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  // With at most 65535 blocks of 256 threads, i + stride stays below 2^31 + 2^24: an int32 loop
  // index could overflow only past 2^31 - 2^24 elements, so index32 leaves that much headroom.
  const LaunchGeometry lg = launch_geometry(g.n);
  if (g.index32 && g.n < (int64_t{1} << 31) - (int64_t{1} << 25))
    strided_copy_kernel<W, int32_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(out, in, g);
  else
    strided_copy_kernel<W, int64_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(out, in, g);
  check_launch(ctx);
}

// A contiguous device-to-device copy on ctx's stream.
inline void copy_on_stream(const KernelContext& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CudaContext& cu = cuda_context(ctx);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream), "copy on device");
}

}  // namespace weft::cuda
