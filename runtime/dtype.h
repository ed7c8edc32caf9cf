// Element types. `weft::float32` etc. are the names users write; DType is the enum behind them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "runtime/half.h"

namespace weft {

enum class DType : uint8_t { Float16, BFloat16, Float32, Float64, Int8, UInt8, Int32, Int64, Bool };
inline constexpr int kNumDTypes = 9;

inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType int8 = DType::Int8;
inline constexpr DType uint8 = DType::UInt8;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType bool_ = DType::Bool;

std::string_view dtype_name(DType dtype);
// Parses "float32", ...; returns false for an unknown name.
bool parse_dtype(std::string_view name, DType* out);

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Float32:
    case DType::Int32: return 4;
    case DType::Float64:
    case DType::Int64: return 8;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}
constexpr bool is_integer(DType d) {
  return d == DType::Int8 || d == DType::UInt8 || d == DType::Int32 || d == DType::Int64;
}

// C++ type <-> DType.
template <class T> struct dtype_of;
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <class T> inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

// Calls f(T{}) with the C++ type of `d`; the caller's lambda is instantiated for all nine.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int8: return f(int8_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  return f(float{});
}

}  // namespace weft
