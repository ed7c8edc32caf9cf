// Definitions of the ops that make tensors from nothing but attributes: Fill and Range.
#include <cmath>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_fill(InferContext& ctx) {
  if (ctx.input_shape(0).rank() != 0) ctx.fail("value must be a scalar, got shape " + ctx.input_shape(0).to_string());
  const Shape& shape = ctx.attrs().get<Shape>("shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail("shape " + shape.to_string() + " has a negative dimension");
  ctx.set_output(0, ctx.input_dtype(0), shape);
}

void infer_range(InferContext& ctx) {
  double start = ctx.attrs().get<double>("start");
  double limit = ctx.attrs().get<double>("limit");
  double delta = ctx.attrs().get<double>("delta");
  DType dtype = ctx.attrs().get<DType>("dtype");
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    ctx.fail("start, limit and delta must be finite");
  if (delta == 0) ctx.fail("delta must not be zero");
  if (delta > 0 && start > limit)
    ctx.fail("start (" + std::to_string(start) + ") must be <= limit (" + std::to_string(limit) + ") when delta > 0");
  if (delta < 0 && start < limit)
    ctx.fail("start (" + std::to_string(start) + ") must be >= limit (" + std::to_string(limit) + ") when delta < 0");
  double n = std::ceil(std::abs((limit - start) / delta));
  if (n > 1e12) ctx.fail("would produce " + std::to_string(n) + " elements");
  if (dtype != DType::Float32 && dtype != DType::Float64 && dtype != DType::Int32 && dtype != DType::Int64)
    ctx.fail("dtype " + std::string(dtype_name(dtype)) + " is not supported");
  ctx.set_output(0, dtype, Shape{static_cast<int64_t>(n)});
}

}  // namespace

void register_creation_defs() {
  op_registry().add({.name = "Fill", .display = "fill", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"shape", AttrType::Shape}}, .infer = infer_fill, .flags = kNotDifferentiable});
  op_registry().add({.name = "Range", .display = "range", .min_inputs = 0, .max_inputs = 0,
                     .attrs = {{"start", AttrType::Float}, {"limit", AttrType::Float}, {"delta", AttrType::Float},
                               {"dtype", AttrType::Type}},
                     .infer = infer_range, .flags = kNotDifferentiable, .kernel_dtype_input = -1});
}

}  // namespace weft::defs
