// CUDA Cast between any two of the nine dtypes, bit for bit the CPU kernel's answer
// (kernels/cpu/cast.cpp): float16 and bfloat16 round to nearest even with the CPU's NaN bits;
// float64, int32 and int64 reach them through a double rounded to odd so that there is one
// rounding only; float -> integer truncates and saturates (NaN -> 0); integer -> integer wraps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/elementwise_launch.cuh"
#include "runtime/dtype.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
__device__ __forceinline__ double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return static_cast<double>(__half2float(__ushort_as_half(v.bits)));
  else if constexpr (std::is_same_v<T, BFloat16>) return static_cast<double>(__bfloat162float(__ushort_as_bfloat16(v.bits)));
  else return static_cast<double>(v);
}

// Truncate toward zero and set the last bit when anything was cut off: a later round to nearest
// into 16 bits is then correct (runtime/half.h, float_round_to_odd).
__device__ __forceinline__ float float_round_to_odd_dev(double d) {
  const float f = __double2float_rz(d);
  if (static_cast<double>(f) == d || d != d) return f;
  return __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ double int64_to_double_round_to_odd(long long v) {
  const double d = __ll2double_rz(v);  // |d| <= |v|, so converting back cannot overflow
  if (static_cast<long long>(d) == v) return d;
  return __longlong_as_double(__double_as_longlong(d) | 1ll);
}

template <class T>
inline constexpr bool kExactInFloat = std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                                      std::is_same_v<T, BFloat16> || std::is_same_v<T, int8_t> ||
                                      std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>;

template <class T>
struct IntRange;  // as doubles, for saturating float -> integer casts
template <> struct IntRange<int8_t> { static constexpr double lo = -128.0, hi = 127.0; };
template <> struct IntRange<uint8_t> { static constexpr double lo = 0.0, hi = 255.0; };
template <> struct IntRange<int32_t> { static constexpr double lo = -2147483648.0, hi = 2147483647.0; };
// 2^63 - 1 rounds to 2^63 as a double, so ">= hi" catches every value too large.
template <> struct IntRange<int64_t> { static constexpr double lo = -9223372036854775808.0, hi = 9223372036854775808.0; };

template <class To>
struct ConvertOp {
  template <class From>
  __device__ To operator()(From v) const {
    if constexpr (std::is_same_v<To, From>) {
      return v;
    } else if constexpr (std::is_same_v<To, bool>) {
      return to_double(v) != 0.0;
    } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
      float f;
      if constexpr (kExactInFloat<From>) {
        f = static_cast<float>(to_double(v));  // exact: one rounding, below
      } else if constexpr (std::is_same_v<From, int64_t>) {
        f = float_round_to_odd_dev(int64_to_double_round_to_odd(v));
      } else {
        f = float_round_to_odd_dev(to_double(v));  // double and int32 are exact as doubles
      }
      if constexpr (std::is_same_v<To, Half>) return float_to_half_dev(f);
      else return float_to_bfloat16_dev(f);
    } else if constexpr (std::is_floating_point_v<To>) {
      if constexpr (std::is_integral_v<From> && !std::is_same_v<From, bool>) return static_cast<To>(v);
      else return static_cast<To>(to_double(v));
    } else if constexpr (std::is_integral_v<From>) {  // integer target
      return static_cast<To>(v);  // modular, as in C++20 and NumPy
    } else {
      const double d = to_double(v);
      if (d != d) return To(0);
      if (d <= IntRange<To>::lo) return static_cast<To>(IntRange<To>::lo);
      if (d >= IntRange<To>::hi) {
        if constexpr (std::is_same_v<To, int64_t>) return static_cast<To>(0x7fffffffffffffffll);
        else return static_cast<To>(IntRange<To>::hi);
      }
      return static_cast<To>(d);
    }
  }
};

template <class From>
void cast_kernel(KernelContext& ctx) {
  visit_dtype(ctx.output(0).dtype(), [&](auto to) {
    using To = decltype(to);
    launch_unary(ctx, ConvertOp<To>{}, static_cast<To*>(raw_data(ctx.output(0))),
                 static_cast<const From*>(raw_data(ctx.input(0))));
  });
}

}  // namespace

void register_cast_kernels() {
  register_kernel("Cast", DeviceType::CUDA, float16, cast_kernel<Half>);
  register_kernel("Cast", DeviceType::CUDA, bfloat16, cast_kernel<BFloat16>);
  register_kernel("Cast", DeviceType::CUDA, float32, cast_kernel<float>);
  register_kernel("Cast", DeviceType::CUDA, float64, cast_kernel<double>);
  register_kernel("Cast", DeviceType::CUDA, int8, cast_kernel<int8_t>);
  register_kernel("Cast", DeviceType::CUDA, uint8, cast_kernel<uint8_t>);
  register_kernel("Cast", DeviceType::CUDA, int32, cast_kernel<int32_t>);
  register_kernel("Cast", DeviceType::CUDA, int64, cast_kernel<int64_t>);
  register_kernel("Cast", DeviceType::CUDA, bool_, cast_kernel<bool>);
}

}  // namespace weft::cuda
