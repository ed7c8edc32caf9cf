#include "api/ops/scalar.h"
#include "runtime/tensor_internals.h"

#include <cmath>
#include <limits>
#include <string>

namespace weft {

namespace {

template <class T>
Tensor make(DType dtype, T v) {
  Tensor t = Tensor::empty(dtype, Shape{});
  *static_cast<T*>(raw_data(t)) = v;
  return t;
}

[[noreturn]] void not_representable(DType dtype, const std::string& value, const char* op) {
  throw InvalidArgument(std::string("[") + op + "] the number " + value + " cannot be represented as " +
                        std::string(dtype_name(dtype)) + " (cast the tensor first)");
}

// Compares against max + 1 (a power of two, exact in double) with <: `v <= double(max)` lets 2^63
// through for int64, because double(INT64_MAX) rounds up to 2^63, and converting it is UB.
template <class I>
bool fits(double v) {
  return std::nearbyint(v) == v && v >= static_cast<double>(std::numeric_limits<I>::lowest()) &&
         v < static_cast<double>(std::numeric_limits<I>::max() / 2 + 1) * 2.0;
}

}  // namespace

void throw_empty_operand(const char* op) {
  throw InvalidArgument(std::string("[") + op +
                        "] the tensor operand is an empty Tensor handle (default-constructed or moved from)");
}

Tensor scalar_tensor(DType dtype, double value, const char* op) {
  switch (dtype) {
    case DType::Float32: return make<float>(dtype, static_cast<float>(value));
    case DType::Float64: return make<double>(dtype, value);
    case DType::Float16: return make<Half>(dtype, double_to_half(value));
    case DType::BFloat16: return make<BFloat16>(dtype, double_to_bfloat16(value));
    case DType::Int32:
      if (!fits<int32_t>(value)) not_representable(dtype, std::to_string(value), op);
      return make<int32_t>(dtype, static_cast<int32_t>(value));
    case DType::Int64:
      if (!fits<int64_t>(value)) not_representable(dtype, std::to_string(value), op);
      return make<int64_t>(dtype, static_cast<int64_t>(value));
    case DType::Int8:
      if (!fits<int8_t>(value)) not_representable(dtype, std::to_string(value), op);
      return make<int8_t>(dtype, static_cast<int8_t>(value));
    case DType::UInt8:
      if (!fits<uint8_t>(value)) not_representable(dtype, std::to_string(value), op);
      return make<uint8_t>(dtype, static_cast<uint8_t>(value));
    case DType::Bool: return make<bool>(dtype, value != 0);
  }
  not_representable(dtype, std::to_string(value), op);
}

Tensor scalar_tensor(DType dtype, int64_t value, const char* op) {
  auto check = [&](int64_t lo, int64_t hi) {
    if (value < lo || value > hi) not_representable(dtype, std::to_string(value), op);
  };
  switch (dtype) {
    case DType::Int32:
      check(std::numeric_limits<int32_t>::lowest(), std::numeric_limits<int32_t>::max());
      return make<int32_t>(dtype, static_cast<int32_t>(value));
    case DType::Int64: return make<int64_t>(dtype, value);
    case DType::Int8:
      check(-128, 127);
      return make<int8_t>(dtype, static_cast<int8_t>(value));
    case DType::UInt8:
      check(0, 255);
      return make<uint8_t>(dtype, static_cast<uint8_t>(value));
    default: return scalar_tensor(dtype, static_cast<double>(value), op);
  }
}

}  // namespace weft
