// Cast between any two of the nine dtypes. float16 and bfloat16 convert through float32;
// float -> integer truncates toward zero and saturates (NaN -> 0) rather than hitting UB.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/register_all.h"

namespace weft::cpu {

namespace {

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v);
  else if constexpr (std::is_same_v<T, BFloat16>) return bfloat16_to_float(v);
  else return static_cast<double>(v);
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_double(v) != 0.0;
  } else if constexpr (std::is_same_v<To, Half>) {
    return float_to_half(static_cast<float>(to_double(v)));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return float_to_bfloat16(static_cast<float>(to_double(v)));
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (std::is_integral_v<From> && !std::is_same_v<From, bool>) return static_cast<To>(v);
    else return static_cast<To>(to_double(v));
  } else {  // integer target
    if constexpr (std::is_integral_v<From>) {
      return static_cast<To>(v);  // modular, as in C++20 and NumPy
    } else {
      double d = to_double(v);
      if (std::isnan(d)) return To(0);
      if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
      if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
      return static_cast<To>(d);
    }
  }
}

template <class From>
void cast_kernel(KernelContext& ctx) {
  visit_dtype(ctx.output(0).dtype(), [&](auto to) {
    using To = decltype(to);
    unary_loop<From, To>(ctx, [](From v) { return convert<To>(v); });
  });
}

}  // namespace

void register_cast_kernels() {
  register_kernel("Cast", DeviceType::CPU, float16, cast_kernel<Half>);
  register_kernel("Cast", DeviceType::CPU, bfloat16, cast_kernel<BFloat16>);
  register_kernel("Cast", DeviceType::CPU, float32, cast_kernel<float>);
  register_kernel("Cast", DeviceType::CPU, float64, cast_kernel<double>);
  register_kernel("Cast", DeviceType::CPU, int8, cast_kernel<int8_t>);
  register_kernel("Cast", DeviceType::CPU, uint8, cast_kernel<uint8_t>);
  register_kernel("Cast", DeviceType::CPU, int32, cast_kernel<int32_t>);
  register_kernel("Cast", DeviceType::CPU, int64, cast_kernel<int64_t>);
  register_kernel("Cast", DeviceType::CPU, bool_, cast_kernel<bool>);
}

}  // namespace weft::cpu
