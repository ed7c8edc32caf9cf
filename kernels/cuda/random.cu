// CUDA kernels of RandomUniform and RandomNormal: the CPU kernels' numbers (kernels/cpu/random.cpp)
// from the same Philox streams. Key and stream come from random_stream (runtime/random_seed.h), the
// function the CPU kernel calls, so a seed, an eager draw or run k of a compiled node picks the
// same stream on every device. One thread computes one Philox block (4 float32 or 2 float64
// values), exactly as the CPU does per block.
//
// The numbers of a block are kernels/random_values.h's, the CPU kernel's own: uniform and normal
// draws are bit-identical to the CPU's (its arithmetic, rounded alike, and its own logarithm,
// sine and cosine instead of the math libraries', whose last bits differ).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/philox.h"
#include "kernels/random_values.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/random_seed.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T, bool Normal>
__global__ void random_kernel(T* __restrict__ out, int64_t n, int64_t blocks, uint64_t key, uint64_t stream, double a,
                              double b) {
  const Philox4x32 gen(key);
  constexpr int64_t per_block = std::is_same_v<T, float> ? 4 : 2;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t blk = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; blk < blocks; blk += step) {
    // std::array's operator[] is a host constexpr function: copy the words out instead.
    const auto words = gen(static_cast<uint64_t>(blk), stream);
    uint32_t x[4];
    memcpy(x, &words, sizeof(x));
    T vals[4];
    philox_block_values(x, Normal, a, b, vals);
    const int64_t base = blk * per_block;
    for (int64_t j = 0; j < per_block && base + j < n; ++j) {
      T v = vals[j];
      // Rounding a + (b - a) * u can land on `high`: keep uniform draws inside [low, high).
      if (!Normal && v >= static_cast<T>(b) && b > a) {
        if constexpr (std::is_same_v<T, float>) v = nextafterf(static_cast<float>(b), static_cast<float>(a));
        else v = nextafter(b, a);
      }
      out[base + j] = v;
    }
  }
}

template <class T, bool Normal>
void random_op(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const RandomStream rs = random_stream(ctx.attrs, ctx.execution);  // the CPU kernel's choice
  const double a = ctx.attrs.get<double>(Normal ? "mean" : "low");
  const double b = ctx.attrs.get<double>(Normal ? "stddev" : "high");
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  constexpr int64_t per_block = std::is_same_v<T, float> ? 4 : 2;
  const int64_t blocks = (n + per_block - 1) / per_block;
  const LaunchGeometry lg = launch_geometry(blocks);
  random_kernel<T, Normal><<<lg.blocks, lg.threads, 0, cu.stream>>>(static_cast<T*>(raw_data(ctx.output(0))), n,
                                                                    blocks, rs.key, rs.stream, a, b);
  check_launch(ctx);
}

}  // namespace

void register_random_kernels() {
  register_kernel("RandomNormal", DeviceType::CUDA, float32, random_op<float, true>);
  register_kernel("RandomNormal", DeviceType::CUDA, float64, random_op<double, true>);
  register_kernel("RandomUniform", DeviceType::CUDA, float32, random_op<float, false>);
  register_kernel("RandomUniform", DeviceType::CUDA, float64, random_op<double, false>);
}

}  // namespace weft::cuda
