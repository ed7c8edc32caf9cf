// Plain C++ numbers as operands: `x + 1`, `2.f * x`. The number becomes a 0-d tensor of the
// other operand's dtype; a value that dtype cannot hold exactly is an InvalidArgument.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "runtime/tensor.h"

namespace weft {

template <class T>
concept Scalar = std::is_arithmetic_v<T>;

Tensor scalar_tensor(DType dtype, double value, const char* op);
Tensor scalar_tensor(DType dtype, int64_t value, const char* op);

template <Scalar S>
Tensor scalar_like(const Tensor& like, S value, const char* op) {
  if constexpr (std::is_floating_point_v<S>) return scalar_tensor(like.dtype(), static_cast<double>(value), op);
  else return scalar_tensor(like.dtype(), static_cast<int64_t>(value), op);
}

}  // namespace weft
