// CPU kernels for Fill and Range.
#include <algorithm>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

template <class T>
void fill_kernel(KernelContext& ctx) {
  const T v = *static_cast<const T*>(raw_data(ctx.input(0)));
  T* out = static_cast<T*>(raw_data(ctx.output(0)));
  ctx.pool().parallel_for(ctx.output(0).size(), kCheapGrain,
                          [&](int64_t b, int64_t e) { std::fill(out + b, out + e, v); });
}

template <class T>
void range_kernel(KernelContext& ctx) {
  const double start = ctx.attrs.get<double>("start");
  const double delta = ctx.attrs.get<double>("delta");
  T* out = static_cast<T*>(raw_data(ctx.output(0)));
  const int64_t n = ctx.output(0).size();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<double>(i) * delta);
}

}  // namespace

void register_creation_kernels() {
  register_kernel("Fill", DeviceType::CPU, float16, fill_kernel<Half>);
  register_kernel("Fill", DeviceType::CPU, bfloat16, fill_kernel<BFloat16>);
  register_kernel("Fill", DeviceType::CPU, float32, fill_kernel<float>);
  register_kernel("Fill", DeviceType::CPU, float64, fill_kernel<double>);
  register_kernel("Fill", DeviceType::CPU, int8, fill_kernel<int8_t>);
  register_kernel("Fill", DeviceType::CPU, uint8, fill_kernel<uint8_t>);
  register_kernel("Fill", DeviceType::CPU, int32, fill_kernel<int32_t>);
  register_kernel("Fill", DeviceType::CPU, int64, fill_kernel<int64_t>);
  register_kernel("Fill", DeviceType::CPU, bool_, fill_kernel<bool>);
  register_kernel("Range", DeviceType::CPU, float32, range_kernel<float>);
  register_kernel("Range", DeviceType::CPU, float64, range_kernel<double>);
  register_kernel("Range", DeviceType::CPU, int32, range_kernel<int32_t>);
  register_kernel("Range", DeviceType::CPU, int64, range_kernel<int64_t>);
}

}  // namespace weft::cpu
