// CPU kernels for RandomNormal and RandomUniform on top of Philox. float32 takes four numbers
// per Philox block, float64 two; normals come in Box-Muller pairs from the same block. The
// numbers of a block are kernels/random_values.h's, which the GPU computes too.
#include <cmath>

#include "kernels/philox.h"
#include "kernels/random_values.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/random_seed.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

template <class T>
void generate(KernelContext& ctx, bool normal) {
  const RandomStream rs = random_stream(ctx.attrs, ctx.execution);
  const Philox4x32 gen(rs.key);
  const double a = ctx.attrs.get<double>(normal ? "mean" : "low");
  const double b = ctx.attrs.get<double>(normal ? "stddev" : "high");
  T* out = static_cast<T*>(raw_data(ctx.output(0)));
  const int64_t n = ctx.output(0).size();
  constexpr int64_t per_block = std::is_same_v<T, float> ? 4 : 2;
  const int64_t blocks = (n + per_block - 1) / per_block;
  ctx.pool().parallel_for(blocks, 1024, [&](int64_t b0, int64_t b1) {
    T vals[4];
    for (int64_t blk = b0; blk < b1; ++blk) {
      const auto words = gen(static_cast<uint64_t>(blk), rs.stream);
      const uint32_t x[4] = {words[0], words[1], words[2], words[3]};
      philox_block_values(x, normal, a, b, vals);
      const int64_t base = blk * per_block;
      for (int64_t j = 0; j < per_block && base + j < n; ++j) {
        // Rounding a+(b-a)*u can land on `high`; keep uniform draws inside [low, high).
        T v = vals[j];
        if (!normal && v >= static_cast<T>(b) && b > a) v = std::nextafter(static_cast<T>(b), static_cast<T>(a));
        out[base + j] = v;
      }
    }
  });
}

template <class T>
void normal_kernel(KernelContext& ctx) { generate<T>(ctx, true); }
template <class T>
void uniform_kernel(KernelContext& ctx) { generate<T>(ctx, false); }

}  // namespace

void register_random_kernels() {
  register_kernel("RandomNormal", DeviceType::CPU, float32, normal_kernel<float>);
  register_kernel("RandomNormal", DeviceType::CPU, float64, normal_kernel<double>);
  register_kernel("RandomUniform", DeviceType::CPU, float32, uniform_kernel<float>);
  register_kernel("RandomUniform", DeviceType::CPU, float64, uniform_kernel<double>);
}

}  // namespace weft::cpu
