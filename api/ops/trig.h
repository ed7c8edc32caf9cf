// Trigonometric functions of tensors, in radians, elementwise (float16 to float64).
//
//   Tensor c = weft::cos(x);            // d/dx: -sin(x)
//   Tensor s = weft::sin(x * 2.0);      // d/dx:  cos(x)
#pragma once

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

Tensor sin(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
Tensor cos(const Tensor& x, const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
