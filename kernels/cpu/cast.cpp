// Cast between any two of the nine dtypes. float16 and bfloat16 convert through float32;
// float -> integer truncates toward zero and saturates (NaN -> 0) rather than hitting UB.
#include <cmath>
#include <cstring>
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

// int64 -> double rounded to odd (see float_round_to_odd in runtime/half.h): past 2^53 the
// conversion rounds, and a rounded double can sit on a false tie of float16 or bfloat16.
double to_double_round_to_odd(int64_t v) {
  double d = static_cast<double>(v);
  __int128 back = static_cast<__int128>(d);  // d may be 2^63, which no int64 holds
  if (back == v) return d;
  if ((back > v) == (v > 0)) d = std::nextafter(d, 0.0);  // rounded away from zero: step back
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  u |= 1;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

template <class T>
inline constexpr bool kExactInFloat = std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                                      std::is_same_v<T, BFloat16> || std::is_same_v<T, int8_t> ||
                                      std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>;

// The source value as a double that the 16-bit conversions may round once more without error.
template <class From>
double to_double_for_16bit(From v) {
  if constexpr (std::is_same_v<From, int64_t>) return to_double_round_to_odd(v);
  else return to_double(v);  // exact for every other dtype
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_double(v) != 0.0;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    if constexpr (kExactInFloat<From>) {  // one rounding, the common mixed-precision path
      float f = static_cast<float>(to_double(v));
      if constexpr (std::is_same_v<To, Half>) return float_to_half(f);
      else return float_to_bfloat16(f);
    } else {
      double d = to_double_for_16bit(v);
      if constexpr (std::is_same_v<To, Half>) return double_to_half(d);
      else return double_to_bfloat16(d);
    }
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
