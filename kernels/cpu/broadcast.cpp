// CPU kernel of BroadcastTo: contiguous runs of the input repeated through BroadcastPlan.
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/copy_util.h"
#include <type_traits>

#include "kernels/register_all.h"
#include "runtime/half.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

void broadcast_to_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  if (out.size() == 0) return;
  BroadcastPlan<1> plan(out.shape(), {&x.shape()});
  const size_t width = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(raw_data(x));
  char* dst = static_cast<char*>(raw_data(out));
  const int64_t len = plan.inner;
  const bool contiguous = plan.inner_stride[0] != 0;
  visit_element_width(width, [&](auto w) {
    using W = decltype(w);
    ctx.pool().parallel_for(plan.outer, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(len, 1)),
                            [&](int64_t b, int64_t e) {
      plan.for_rows(b, e, [&](int64_t o, const std::array<int64_t, 1>& off) {
        char* d = dst + o * sizeof(W);
        const char* s = src + off[0] * sizeof(W);
        if (contiguous) {
          std::memcpy(d, s, len * sizeof(W));
        } else {
          W v;
          std::memcpy(&v, s, sizeof(W));
          for (int64_t j = 0; j < len; ++j) std::memcpy(d + j * sizeof(W), &v, sizeof(W));
        }
      });
    });
  });
}

void size_kernel(KernelContext& ctx) {
  const int64_t n = ctx.input(0).size();
  visit_dtype(ctx.output(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_arithmetic_v<T>) *static_cast<T*>(raw_data(ctx.output(0))) = static_cast<T>(n);
    else if constexpr (std::is_same_v<T, Half>) *static_cast<T*>(raw_data(ctx.output(0))) = float_to_half(static_cast<float>(n));
    else *static_cast<T*>(raw_data(ctx.output(0))) = float_to_bfloat16(static_cast<float>(n));
  });
}

}  // namespace

void register_broadcast_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    // BroadcastLike only differs in where the target shape comes from: the output is already
    // allocated with it, and that is all the kernel reads.
    register_kernel("BroadcastTo", DeviceType::CPU, static_cast<DType>(d), broadcast_to_kernel);
    register_kernel("BroadcastLike", DeviceType::CPU, static_cast<DType>(d), broadcast_to_kernel);
    if (static_cast<DType>(d) != DType::Bool) register_kernel("Size", DeviceType::CPU, static_cast<DType>(d), size_kernel);
  }
}

}  // namespace weft::cpu
