// Launching elementwise CUDA kernels: one grid-stride kernel for same-shape operands (flat index)
// and one for broadcast operands (per-input strides from elementwise_geometry.h), the latter with
// 32-bit index arithmetic whenever the output has fewer than 2^31 elements (integer division and
// modulo are several times cheaper in 32 bits).
//
//   struct AddOp { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };
//   launch_elementwise(ctx, AddOp{}, out_ptr, a_ptr, b_ptr);   // inputs in ctx's input order
//
// The functor is called with one value per input and returns the output value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/elementwise_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

template <class F, class TO, class... TI>
__global__ void flat_elementwise_kernel(F f, TO* __restrict__ out, int64_t n, const TI* __restrict__... in) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = f(in[i]...);
}

template <class Index, class F, class TO, class... TI, size_t... K>
__device__ __forceinline__ TO call_at(F& f, const Index (&off)[sizeof...(TI)], std::index_sequence<K...>,
                                      const TI* __restrict__... in) {
  return f(in[off[K]]...);
}

// Index is uint32_t when g.index32, else int64_t. With n < 2^31 and a grid of at most 65535 blocks
// of 256 threads, i + stride stays below 2^32, so the unsigned loop cannot wrap.
template <class Index, class F, class TO, class... TI>
__global__ void broadcast_elementwise_kernel(F f, TO* __restrict__ out, BroadcastStrides g,
                                             const TI* __restrict__... in) {
  constexpr int K = sizeof...(TI);
  const Index n = static_cast<Index>(g.n);
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    Index off[K] = {};
    Index rem = i;
    for (int d = g.rank - 1; d >= 0; --d) {
      const Index dim = static_cast<Index>(g.dims[d]);
      const Index idx = rem % dim;
      rem /= dim;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += idx * static_cast<Index>(g.strides[k][d]);
    }
    out[i] = call_at<Index, F, TO, TI...>(f, off, std::index_sequence_for<TI...>{}, in...);
  }
}

// Runs out = f(in...) over ctx's output 0 on ctx's stream. `in` are the device pointers of ctx's
// inputs 0..K-1, in order, with ctx's shapes. Throws InvalidArgument for shapes the geometry
// refuses and Internal when the launch fails.
template <class F, class TO, class... TI>
void launch_elementwise(const KernelContext& ctx, F f, TO* out, const TI*... in) {
  static_assert(sizeof...(TI) >= 1 && sizeof...(TI) <= kMaxElementwiseInputs);
  CudaContext& cu = cuda_context(ctx);
  const Tensor& o = ctx.output(0);
  const int64_t n = o.size();
  if (n == 0) return;
  const LaunchGeometry lg = launch_geometry(n);
  bool same_shape = true;
  for (int k = 0; k < static_cast<int>(sizeof...(TI)); ++k)
    if (ctx.input(k).size() != n) same_shape = false;
  if (same_shape) {
    flat_elementwise_kernel<F, TO, TI...><<<lg.blocks, lg.threads, 0, cu.stream>>>(f, out, n, in...);
  } else {
    BroadcastStrides g = [&] {
      if constexpr (sizeof...(TI) == 1) return broadcast_strides(o.shape(), {&ctx.input(0).shape()}, ctx.op.display);
      else if constexpr (sizeof...(TI) == 2)
        return broadcast_strides(o.shape(), {&ctx.input(0).shape(), &ctx.input(1).shape()}, ctx.op.display);
      else
        return broadcast_strides(o.shape(), {&ctx.input(0).shape(), &ctx.input(1).shape(), &ctx.input(2).shape()},
                                 ctx.op.display);
    }();
    if (g.index32)
      broadcast_elementwise_kernel<uint32_t, F, TO, TI...><<<lg.blocks, lg.threads, 0, cu.stream>>>(f, out, g, in...);
    else
      broadcast_elementwise_kernel<int64_t, F, TO, TI...><<<lg.blocks, lg.threads, 0, cu.stream>>>(f, out, g, in...);
  }
  check_launch(ctx);
}

// Unary ops: the output has the input's shape, so only the flat kernel is needed.
template <class F, class TO, class TI>
void launch_unary(const KernelContext& ctx, F f, TO* out, const TI* in) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  if (ctx.input(0).size() != n)
    ctx.fail("the CUDA kernel needs an input with the output's " + std::to_string(n) + " elements, got " +
             ctx.input(0).shape().to_string());
  const LaunchGeometry lg = launch_geometry(n);
  flat_elementwise_kernel<F, TO, TI><<<lg.blocks, lg.threads, 0, cu.stream>>>(f, out, n, in);
  check_launch(ctx);
}

// For kernels that can meet data they must refuse: runs `launch` (which queues kernels that store
// a nonzero code in cu.error_word) and waits for the stream; a nonzero code becomes
// ctx.fail(message_of(code)). This synchronises, so only integer Div and Pow use it.
template <class Launch, class Message>
void launch_checked(const KernelContext& ctx, Launch&& launch, Message&& message_of) {
  CudaContext& cu = cuda_context(ctx);
  int32_t code = 0;
  {
    std::lock_guard<std::mutex> lock(cu.error_mu);
    launch(cu.error_word);
    code = read_error_word(cu);
  }
  if (code != 0) ctx.fail(message_of(code));
}

}  // namespace weft::cuda
