// float16 and bfloat16 on the device: weft's host types Half and BFloat16 (runtime/half.h, 16-bit
// patterns) are used directly in device memory; arithmetic is done in float and rounded once back
// to 16 bits, to nearest even, with the CPU's NaN bits (so a result matches float_to_half of the
// same float on the host bit for bit).
//
//   float v = to_compute(x);               // Half/BFloat16 -> float; any other type unchanged
//   Half h = from_compute<Half>(v * 2.f);  // one rounding
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "runtime/half.h"

namespace weft::cuda {

template <class T>
inline constexpr bool kIs16BitFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type a value of T is computed in: float for the 16-bit floats, T itself otherwise.
template <class T>
using Compute = std::conditional_t<kIs16BitFloat<T>, float, T>;

__device__ __forceinline__ Half float_to_half_dev(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Half{static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u)};
  return Half{__half_as_ushort(__float2half_rn(f))};
}
__device__ __forceinline__ BFloat16 float_to_bfloat16_dev(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
}

template <class T>
__device__ __forceinline__ Compute<T> to_compute(T x) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(__ushort_as_half(x.bits));
  else if constexpr (std::is_same_v<T, BFloat16>) return __bfloat162float(__ushort_as_bfloat16(x.bits));
  else return x;
}

template <class T>
__device__ __forceinline__ T from_compute(Compute<T> v) {
  if constexpr (std::is_same_v<T, Half>) return float_to_half_dev(v);
  else if constexpr (std::is_same_v<T, BFloat16>) return float_to_bfloat16_dev(v);
  else return v;
}

}  // namespace weft::cuda
