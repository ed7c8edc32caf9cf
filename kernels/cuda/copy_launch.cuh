// Shared by the CUDA data-movement kernels (transpose.cu, array.cu, pad.cu, scatter.cu,
// creation.cu): copies typed by element width only (a float and an int32 move alike, so each
// kernel is compiled for four widths instead of nine dtypes), the strided gather of
// copy_geometry.h, plain device-to-device copies, and the check of index tensors against a bound
// that refuses bad data with the CPU kernel's message.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "kernels/cpu/copy_util.h"
#include "kernels/cpu/index_errors.h"
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

inline constexpr int32_t kErrorIndexOutOfRange = 3;

template <class I>
__global__ void check_range_kernel(const I* __restrict__ values, int64_t count, int64_t limit, int32_t* error) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride) {
    const int64_t v = static_cast<int64_t>(values[j]);
    if (v < 0 || v >= limit) report_error(error, kErrorIndexOutOfRange);
  }
}

// Refuses `ids` (an int32 or int64 tensor on ctx's GPU) when a value is outside [0, limit):
// ctx.fail(message(flat position, value)) for the first such value, as the CPU kernel does. The
// check synchronises with the stream; only the failing case copies the ids to the host, to name
// the first bad one.
template <class Message>
void check_ids_in_range(const KernelContext& ctx, const Tensor& ids, int64_t limit, Message&& message) {
  const int64_t count = ids.size();
  if (count == 0) return;
  const LaunchGeometry lg = launch_geometry(count);
  auto find_first = [&](auto zero) -> std::string {
    using I = decltype(zero);
    const Tensor host = ids.to(cpu_device());
    const I* v = static_cast<const I*>(raw_data(host));
    const int64_t j = cpu::first_out_of_range(v, count, limit);
    if (j < 0) return "the CUDA range check reported an index out of range that the host cannot find";
    return message(j, static_cast<int64_t>(v[j]));
  };
  launch_checked(
      ctx,
      [&](int32_t* word) {
        CudaContext& cu = cuda_context(ctx);
        if (ids.dtype() == DType::Int64)
          check_range_kernel<int64_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(
              static_cast<const int64_t*>(raw_data(ids)), count, limit, word);
        else
          check_range_kernel<int32_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(
              static_cast<const int32_t*>(raw_data(ids)), count, limit, word);
        check_launch(ctx);
      },
      [&](int32_t) { return ids.dtype() == DType::Int64 ? find_first(int64_t{}) : find_first(int32_t{}); });
}

}  // namespace weft::cuda
