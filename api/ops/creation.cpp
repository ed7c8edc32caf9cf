#include "api/ops/creation.h"

#include "api/dispatch.h"
#include "api/ops/array.h"

namespace weft {

Tensor constant_from_host(DType dtype, const void* data, int64_t count, Shape shape, const char* what) {
  for (int64_t d : shape)
    if (d < 0)
      throw InvalidArgument(std::string("[") + what + "] shape " + shape.to_string() + " has a negative dimension");
  if (shape.num_elements() != count)
    throw InvalidArgument(std::string("[") + what + "] " + std::to_string(count) + " values do not fill shape " +
                          shape.to_string() + " (" + std::to_string(shape.num_elements()) + " elements)");
  return Tensor::from_host(dtype, std::move(shape), data);
}

Tensor fill(const Shape& shape, const Tensor& value, const SourceLocation& loc) {
  static const OpDef& op = op_def("Fill");
  return dispatch1(op, {value}, {{"shape", shape}}, loc);
}

Tensor zeros(const Shape& shape, DType dtype, const SourceLocation& loc) {
  return fill(shape, scalar_tensor(dtype, int64_t{0}, "zeros"), loc);
}

Tensor ones(const Shape& shape, DType dtype, const SourceLocation& loc) {
  return fill(shape, scalar_tensor(dtype, int64_t{1}, "ones"), loc);
}

// Traced with unknown dims, the shape is only known at run time: a scalar broadcast like x.
Tensor zeros_like(const Tensor& x, const SourceLocation& loc) {
  if (!x.shape().is_fully_defined()) return broadcast_like(zeros({}, x.dtype(), loc), x, loc);
  return zeros(x.shape(), x.dtype(), loc);
}
Tensor ones_like(const Tensor& x, const SourceLocation& loc) {
  if (!x.shape().is_fully_defined()) return broadcast_like(ones({}, x.dtype(), loc), x, loc);
  return ones(x.shape(), x.dtype(), loc);
}

Tensor range_of(DType dtype, double start, double limit, double delta, const SourceLocation& loc) {
  static const OpDef& op = op_def("Range");
  return dispatch1(op, {}, {{"start", start}, {"limit", limit}, {"delta", delta}, {"dtype", dtype}}, loc);
}

}  // namespace weft
