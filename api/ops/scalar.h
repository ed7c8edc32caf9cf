// Plain C++ numbers as operands: `x + 1`, `2.f * x`. The number becomes a 0-d tensor of the
// other operand's dtype; a value that dtype cannot hold exactly is an InvalidArgument.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/tensor.h"

namespace weft {

template <class T>
concept Scalar = std::is_arithmetic_v<T>;

Tensor scalar_tensor(DType dtype, double value, const char* op);
Tensor scalar_tensor(DType dtype, int64_t value, const char* op);

[[noreturn]] void throw_empty_operand(const char* op);

template <Scalar S>
Tensor scalar_like(const Tensor& like, S value, const char* op) {
  if (!like.defined()) throw_empty_operand(op);  // before like.dtype(), which cannot name the op
  if constexpr (std::is_floating_point_v<S>) {
    return scalar_tensor(like.dtype(), static_cast<double>(value), op);
  } else if constexpr (std::is_unsigned_v<S> && sizeof(S) >= sizeof(int64_t)) {
    // Past INT64_MAX the int64 path would wrap to a negative number; the double path rejects it
    // for integer dtypes and keeps its magnitude for float ones.
    if (value > static_cast<S>(std::numeric_limits<int64_t>::max()))
      return scalar_tensor(like.dtype(), static_cast<double>(value), op);
    return scalar_tensor(like.dtype(), static_cast<int64_t>(value), op);
  } else {
    return scalar_tensor(like.dtype(), static_cast<int64_t>(value), op);
  }
}

}  // namespace weft
