// CUDA kernels of RandomUniform and RandomNormal: the CPU kernels' numbers (kernels/cpu/random.cpp)
// from the same Philox streams. Key and stream come from random_stream (runtime/random_seed.h), the
// function the CPU kernel calls, so a seed, an eager draw or run k of a compiled node picks the
// same stream on every device. One thread computes one Philox block (4 float32 or 2 float64
// values), exactly as the CPU does per block.
//
// Uniform draws are bit-identical to the CPU's: the arithmetic is the CPU's, in the same types,
// with every double multiply and add rounded separately (__dmul_rn / __dadd_rn: nvcc would
// otherwise contract them into an FMA, which the CPU build, without -mfma, never does). Normal
// draws go through log, sqrt, sin and cos, whose last bits differ between glibc and CUDA's math
// library: equal within a few ulps.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/philox.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/random_seed.h"

namespace weft::cuda {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

__device__ __forceinline__ double affine(double a, double scale, double u) { return __dadd_rn(a, __dmul_rn(scale, u)); }

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
    if constexpr (std::is_same_v<T, float>) {
      if constexpr (Normal) {
        for (int p = 0; p < 2; ++p) {
          const float r = sqrtf(__fmul_rn(-2.0f, logf(unit_float_open0(x[2 * p]))));
          const float t = __fmul_rn(static_cast<float>(kTwoPi), unit_float(x[2 * p + 1]));
          vals[2 * p] = static_cast<float>(affine(a, b, static_cast<double>(__fmul_rn(r, cosf(t)))));
          vals[2 * p + 1] = static_cast<float>(affine(a, b, static_cast<double>(__fmul_rn(r, sinf(t)))));
        }
      } else {
        for (int p = 0; p < 4; ++p) vals[p] = static_cast<float>(affine(a, __dsub_rn(b, a), unit_float(x[p])));
      }
    } else {
      if constexpr (Normal) {
        const double r = sqrt(__dmul_rn(-2.0, log(unit_double_open0(x[0], x[1]))));
        const double t = __dmul_rn(kTwoPi, unit_double(x[2], x[3]));
        const double br = __dmul_rn(b, r);  // the CPU's a + b * r * cos(t) is a + (b * r) * cos(t)
        vals[0] = __dadd_rn(a, __dmul_rn(br, cos(t)));
        vals[1] = __dadd_rn(a, __dmul_rn(br, sin(t)));
      } else {
        vals[0] = affine(a, __dsub_rn(b, a), unit_double(x[0], x[1]));
        vals[1] = affine(a, __dsub_rn(b, a), unit_double(x[2], x[3]));
      }
    }
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
  random_kernel<T, Normal><<<lg.blocks, lg.threads, 0, cu.stream>>>(static_cast<T*>(ctx.output(0).raw_data()), n,
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
