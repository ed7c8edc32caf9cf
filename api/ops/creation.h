// Making tensors.
//
//   constant(3.f)                       // scalar float32
//   constant({1.f, 2.f, 3.f})           // shape (3,)
//   constant({{1, 2}, {3, 4}})          // shape (2, 2), int32
//   constant(std::vector<double>(6, 1.0), Shape{2, 3})
//   zeros({2, 3}); ones({4}, int64); fill({2, 2}, 7); range(0, 10, 2)
#pragma once

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"
#include "api/ops/scalar.h"

namespace weft {

// Element types a constant can be built from: the C++ types of the nine dtypes.
template <class T>
concept Element = requires { dtype_of<std::remove_cv_t<T>>::value; };

// A host tensor from raw elements; `count` must equal the shape's element count.
Tensor constant_from_host(DType dtype, const void* data, int64_t count, Shape shape, const char* what = "constant");

template <Element T>
Tensor constant(T value) {
  return constant_from_host(dtype_v<T>, &value, 1, Shape{});
}

// Host storage for elements of T: std::vector<bool> is packed and has no data(), so bools are
// gathered as bytes (a bool is one byte in a tensor).
template <class T>
using HostElement = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <Element T>
Tensor constant(std::initializer_list<T> values) {
  // An initializer_list's elements are contiguous: no copy needed, bools included.
  return constant_from_host(dtype_v<T>, values.begin(), static_cast<int64_t>(values.size()),
                            Shape{static_cast<int64_t>(values.size())});
}

template <Element T>
Tensor constant(std::initializer_list<std::initializer_list<T>> rows) {
  std::vector<HostElement<T>> flat;
  int64_t cols = rows.size() ? static_cast<int64_t>(rows.begin()->size()) : 0;
  for (const auto& r : rows) {
    if (static_cast<int64_t>(r.size()) != cols)
      throw InvalidArgument("[constant] rows have different lengths (" + std::to_string(cols) + " and " +
                            std::to_string(r.size()) + ")");
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return constant_from_host(dtype_v<T>, flat.data(), static_cast<int64_t>(flat.size()),
                            Shape{static_cast<int64_t>(rows.size()), cols});
}

template <Element T>
Tensor constant(std::initializer_list<std::initializer_list<std::initializer_list<T>>> planes) {
  std::vector<HostElement<T>> flat;
  int64_t rows = planes.size() ? static_cast<int64_t>(planes.begin()->size()) : 0;
  int64_t cols = rows ? static_cast<int64_t>(planes.begin()->begin()->size()) : 0;
  for (const auto& p : planes) {
    if (static_cast<int64_t>(p.size()) != rows) throw InvalidArgument("[constant] planes have different row counts");
    for (const auto& r : p) {
      if (static_cast<int64_t>(r.size()) != cols) throw InvalidArgument("[constant] rows have different lengths");
      flat.insert(flat.end(), r.begin(), r.end());
    }
  }
  return constant_from_host(dtype_v<T>, flat.data(), static_cast<int64_t>(flat.size()),
                            Shape{static_cast<int64_t>(planes.size()), rows, cols});
}

template <Element T>
Tensor constant(const std::vector<T>& values, Shape shape) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // vector<bool> has no data()
    return constant_from_host(DType::Bool, bytes.data(), static_cast<int64_t>(bytes.size()), std::move(shape));
  } else {
    return constant_from_host(dtype_v<T>, values.data(), static_cast<int64_t>(values.size()), std::move(shape));
  }
}
template <Element T>
Tensor constant(const std::vector<T>& values) {
  return constant(values, Shape{static_cast<int64_t>(values.size())});
}

Tensor zeros(const Shape& shape, DType dtype = float32, const SourceLocation& loc = SourceLocation::current());
Tensor ones(const Shape& shape, DType dtype = float32, const SourceLocation& loc = SourceLocation::current());
Tensor zeros_like(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor ones_like(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
// Every element `value`; the dtype follows the C++ type of value (int -> int32, float -> float32).
Tensor fill(const Shape& shape, const Tensor& value, const SourceLocation& loc = SourceLocation::current());
template <Element T>
Tensor fill(const Shape& shape, T value, const SourceLocation& loc = SourceLocation::current()) {
  return fill(shape, constant(value), loc);
}

// [start, limit) in steps of delta, like Python's range and tf.range; dtype from the arguments.
Tensor range_of(DType dtype, double start, double limit, double delta,
                const SourceLocation& loc = SourceLocation::current());
template <Scalar T>
Tensor range(T start, T limit, T delta = T(1), const SourceLocation& loc = SourceLocation::current()) {
  return range_of(dtype_v<T>, static_cast<double>(start), static_cast<double>(limit), static_cast<double>(delta), loc);
}
template <Scalar T>
Tensor range(T limit, const SourceLocation& loc = SourceLocation::current()) {
  return range_of(dtype_v<T>, 0.0, static_cast<double>(limit), 1.0, loc);
}

}  // namespace weft
