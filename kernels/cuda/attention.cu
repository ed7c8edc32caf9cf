// CUDA kernels of ScaledDotProductAttention and its gradient (kernels/cpu/attention.cpp is the
// reference; kernels/defs/attention.cpp says what they compute): float32 and float64, and float16 /
// bfloat16 computed in float and rounded once.
//
// Straightforward kernels of weft's own, correct before fast: one thread per query row for the
// output and dq, one per key row for dk and dv, each walking the other sequence with the same
// rules (mask, bottom-right causal alignment, Philox dropout by element index) as the CPU, and
// accumulating in float (double for float64). Memory stays linear in the sequence. float16 and
// bfloat16 calls go to cuDNN's fused attention first (attention_cudnn.h says when it takes them);
// these kernels compute the rest. A tiled float32 kernel in shared memory is the next step.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/attention_params.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/philox.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

constexpr int kThreads = 128;

using Geo = AttentionParams;

__device__ bool visible(const Geo& g, int64_t bh, int64_t i, int64_t j) {
  return j <= g.last_key(i) && g.mask_keeps(bh, i, j);
}

template <class P>
__device__ P keep_factor(const Geo& g, int64_t bh, int64_t i, int64_t j) {
  if (g.dropout <= 0) return P(1);
  const uint64_t e = static_cast<uint64_t>((bh * g.sq + i) * g.sk + j);
  // std::array's operator[] is a host constexpr function: copy the words out instead.
  const auto words = Philox4x32(g.seed)(e / 4);
  uint32_t x[4];
  memcpy(x, &words, sizeof(x));
  const uint32_t word = x[e % 4];
  return unit_float(word) >= static_cast<float>(g.dropout) ? static_cast<P>(1.0 / (1.0 - g.dropout)) : P(0);
}

template <class T, class P>
__device__ P score(const Geo& g, const T* qh, const T* kh, int64_t i, int64_t j) {
  P s = 0;
  for (int64_t c = 0; c < g.d; ++c) s += static_cast<P>(to_compute(qh[i * g.d + c])) * static_cast<P>(to_compute(kh[j * g.d + c]));
  return s * static_cast<P>(g.scale);
}

template <class T, class P>
__global__ void forward_kernel(Geo g, const T* q, const T* k, const T* v, T* out, P* lse, P* acc, int64_t rows) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  const int64_t bh = row / g.sq, i = row % g.sq;
  const T* qh = q + bh * g.sq * g.d;
  const T* kh = k + bh * g.sk * g.d;
  const T* vh = v + bh * g.sk * g.dv;
  P* a = acc + row * g.dv;
  P m = -INFINITY;
  for (int64_t j = 0; j < g.sk; ++j)
    if (visible(g, bh, i, j)) m = fmax(m, score<T, P>(g, qh, kh, i, j));
  for (int64_t c = 0; c < g.dv; ++c) a[c] = 0;
  if (m == -INFINITY) {
    for (int64_t c = 0; c < g.dv; ++c) out[row * g.dv + c] = from_compute<T>(static_cast<Compute<T>>(0));
    lse[row] = -INFINITY;
    return;
  }
  P l = 0;
  for (int64_t j = 0; j < g.sk; ++j) {
    if (!visible(g, bh, i, j)) continue;
    const P p = exp(score<T, P>(g, qh, kh, i, j) - m);
    l += p;
    const P pd = p * keep_factor<P>(g, bh, i, j);
    for (int64_t c = 0; c < g.dv; ++c) a[c] += pd * static_cast<P>(to_compute(vh[j * g.dv + c]));
  }
  for (int64_t c = 0; c < g.dv; ++c) out[row * g.dv + c] = from_compute<T>(static_cast<Compute<T>>(a[c] / l));
  lse[row] = m + log(l);
}

// D_i = dout_i . out_i
template <class T, class P>
__global__ void delta_kernel(Geo g, const T* dout, const T* out, P* delta, int64_t rows) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  P s = 0;
  for (int64_t c = 0; c < g.dv; ++c)
    s += static_cast<P>(to_compute(dout[row * g.dv + c])) * static_cast<P>(to_compute(out[row * g.dv + c]));
  delta[row] = s;
}

// P, and dS = P (dP - D), of one (query i, key j).
template <class T, class P>
__device__ void probability_and_ds(const Geo& g, const T* qh, const T* kh, const T* vh, const T* douth, const P* lseh,
                                   const P* deltah, int64_t bh, int64_t i, int64_t j, P* p_dropped, P* ds) {
  const P p = exp(score<T, P>(g, qh, kh, i, j) - lseh[i]);
  P dp = 0;
  for (int64_t c = 0; c < g.dv; ++c)
    dp += static_cast<P>(to_compute(douth[i * g.dv + c])) * static_cast<P>(to_compute(vh[j * g.dv + c]));
  const P keep = keep_factor<P>(g, bh, i, j);
  *p_dropped = p * keep;
  *ds = p * (dp * keep - deltah[i]);
}

template <class T, class P>
__global__ void dq_kernel(Geo g, const T* q, const T* k, const T* v, const T* dout, const P* lse, const P* delta,
                          T* dq, P* acc, int64_t rows) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  const int64_t bh = row / g.sq, i = row % g.sq;
  const T* kh = k + bh * g.sk * g.d;
  P* a = acc + row * g.d;
  for (int64_t c = 0; c < g.d; ++c) a[c] = 0;
  if (lse[row] != -INFINITY) {
    for (int64_t j = 0; j < g.sk; ++j) {
      if (!visible(g, bh, i, j)) continue;
      P pd, ds;
      probability_and_ds<T, P>(g, q + bh * g.sq * g.d, kh, v + bh * g.sk * g.dv, dout + bh * g.sq * g.dv,
                               lse + bh * g.sq, delta + bh * g.sq, bh, i, j, &pd, &ds);
      for (int64_t c = 0; c < g.d; ++c) a[c] += ds * static_cast<P>(to_compute(kh[j * g.d + c]));
    }
  }
  for (int64_t c = 0; c < g.d; ++c)
    dq[row * g.d + c] = from_compute<T>(static_cast<Compute<T>>(a[c] * static_cast<P>(g.scale)));
}

template <class T, class P>
__global__ void dkv_kernel(Geo g, const T* q, const T* k, const T* v, const T* dout, const P* lse, const P* delta,
                           T* dk, T* dv, P* acc, int64_t keys) {
  const int64_t key = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (key >= keys) return;
  const int64_t bh = key / g.sk, j = key % g.sk;
  const T* qh = q + bh * g.sq * g.d;
  const T* douth = dout + bh * g.sq * g.dv;
  P* ak = acc + key * (g.d + g.dv);
  P* av = ak + g.d;
  for (int64_t c = 0; c < g.d + g.dv; ++c) ak[c] = 0;
  for (int64_t i = 0; i < g.sq; ++i) {
    if (lse[bh * g.sq + i] == -INFINITY || !visible(g, bh, i, j)) continue;
    P pd, ds;
    probability_and_ds<T, P>(g, qh, k + bh * g.sk * g.d, v + bh * g.sk * g.dv, douth, lse + bh * g.sq,
                             delta + bh * g.sq, bh, i, j, &pd, &ds);
    for (int64_t c = 0; c < g.d; ++c) ak[c] += ds * static_cast<P>(to_compute(qh[i * g.d + c]));
    for (int64_t c = 0; c < g.dv; ++c) av[c] += pd * static_cast<P>(to_compute(douth[i * g.dv + c]));
  }
  for (int64_t c = 0; c < g.d; ++c)
    dk[key * g.d + c] = from_compute<T>(static_cast<Compute<T>>(ak[c] * static_cast<P>(g.scale)));
  for (int64_t c = 0; c < g.dv; ++c) dv[key * g.dv + c] = from_compute<T>(static_cast<Compute<T>>(av[c]));
}

// The problem from the attributes and the inputs (q at `first`); the dropout seed is read back
// from the device, once per call.
uint64_t read_seed(KernelContext& ctx, int input) {
  int64_t seed = 0;
  cudaMemcpyAsync(&seed, raw_data(ctx.input(input)), sizeof(seed), cudaMemcpyDeviceToHost, cuda_context(ctx).stream);
  cudaStreamSynchronize(cuda_context(ctx).stream);
  return static_cast<uint64_t>(seed);
}

Geo geometry(KernelContext& ctx, int first, int extra) {
  Geo g = attention_params(ctx, first, extra);
  if (g.seed_input >= 0) g.seed = read_seed(ctx, g.seed_input);
  return g;
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <class T, class P>
void attention(KernelContext& ctx) {
  const Geo g = geometry(ctx, 0, 3);
  const int64_t rows = ctx.output(1).size();
  if (rows == 0 || cudnn_attention_forward(ctx, g)) return;
  Tensor acc = Tensor::empty(ctx.output(1).dtype(), Shape{rows * g.dv}, &ctx.device);
  forward_kernel<T, P><<<blocks_for(rows), kThreads, 0, cuda_context(ctx).stream>>>(
      g, static_cast<const T*>(raw_data(ctx.input(0))), static_cast<const T*>(raw_data(ctx.input(1))), static_cast<const T*>(raw_data(ctx.input(2))), static_cast<T*>(raw_data(ctx.output(0))),
      static_cast<P*>(raw_data(ctx.output(1))), static_cast<P*>(raw_data(acc)), rows);
  check_launch(ctx);
}

template <class T, class P>
void attention_grad(KernelContext& ctx) {
  const Geo g = geometry(ctx, 1, 6);
  if (cudnn_attention_backward(ctx, g)) return;
  const int64_t rows = ctx.input(5).size();
  cudaStream_t stream = cuda_context(ctx).stream;
  const DType pd = ctx.input(5).dtype();
  Tensor delta = Tensor::empty(pd, Shape{rows}, &ctx.device);
  const T* dout = static_cast<const T*>(raw_data(ctx.input(0)));
  const T* q = static_cast<const T*>(raw_data(ctx.input(1)));
  const T* k = static_cast<const T*>(raw_data(ctx.input(2)));
  const T* v = static_cast<const T*>(raw_data(ctx.input(3)));
  const P* lse = static_cast<const P*>(raw_data(ctx.input(5)));
  P* dl = static_cast<P*>(raw_data(delta));
  if (rows > 0) {
    delta_kernel<T, P><<<blocks_for(rows), kThreads, 0, stream>>>(g, dout, static_cast<const T*>(raw_data(ctx.input(4))), dl, rows);
    check_launch(ctx);
    Tensor acc = Tensor::empty(pd, Shape{rows * g.d}, &ctx.device);
    dq_kernel<T, P><<<blocks_for(rows), kThreads, 0, stream>>>(g, q, k, v, dout, lse, dl, static_cast<T*>(raw_data(ctx.output(0))),
                                                              static_cast<P*>(raw_data(acc)), rows);
    check_launch(ctx);
  }
  const int64_t nkeys = ctx.input(2).size() / (g.d > 0 ? g.d : 1);
  if (nkeys > 0) {
    Tensor acc = Tensor::empty(pd, Shape{nkeys * (g.d + g.dv)}, &ctx.device);
    dkv_kernel<T, P><<<blocks_for(nkeys), kThreads, 0, stream>>>(g, q, k, v, dout, lse, dl, static_cast<T*>(raw_data(ctx.output(1))),
                                                                static_cast<T*>(raw_data(ctx.output(2))),
                                                                static_cast<P*>(raw_data(acc)), nkeys);
    check_launch(ctx);
  }
}

// AttentionDropoutMask: the factors keep_factor gives the kernels above, one thread per element.
template <class P>
__global__ void dropout_mask_kernel(Geo g, P* out, int64_t n) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int64_t j = e % g.sk, row = e / g.sk;
  out[e] = keep_factor<P>(g, row / g.sq, row % g.sq, j);
}

template <class P>
void dropout_mask(KernelContext& ctx) {
  Geo g = dropout_mask_params(ctx);
  g.seed = read_seed(ctx, g.seed_input);
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  dropout_mask_kernel<P><<<blocks_for(n), kThreads, 0, cuda_context(ctx).stream>>>(
      g, static_cast<P*>(raw_data(ctx.output(0))), n);
  check_launch(ctx);
}

template <class T, class P>
void register_dtype(DType dt) {
  register_kernel("ScaledDotProductAttention", DeviceType::CUDA, dt, attention<T, P>);
  register_kernel("ScaledDotProductAttentionGrad", DeviceType::CUDA, dt, attention_grad<T, P>);
}

}  // namespace

void register_attention_kernels() {
  register_kernel("AttentionDropoutMask", DeviceType::CUDA, float32, dropout_mask<float>);
  register_kernel("AttentionDropoutMask", DeviceType::CUDA, float64, dropout_mask<double>);
  register_dtype<float, float>(float32);
  register_dtype<double, double>(float64);
  register_dtype<Half, float>(float16);
  register_dtype<BFloat16, float>(bfloat16);
}

}  // namespace weft::cuda
