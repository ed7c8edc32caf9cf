// Definitions of the arithmetic, comparison, select and cast ops. All but Cast take float16 and
// bfloat16 (computed in float32 and rounded; see kRealNumericOrHalf in shape_fns.h).
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// Equality and Select also take bool.
constexpr std::initializer_list<DType> kEqualityDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                                          DType::Bool,    DType::Float16, DType::BFloat16};

void infer_binary(InferContext& ctx) {
  check_same_dtype(ctx, 0, 2);
  check_dtype_in(ctx, 0, kRealNumericOrHalf);
  ctx.set_output(0, ctx.input_dtype(0), broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_compare(InferContext& ctx) {
  check_same_dtype(ctx, 0, 2);
  check_dtype_in(ctx, 0, kRealNumericOrHalf);
  ctx.set_output(0, DType::Bool, broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_equality(InferContext& ctx) {
  check_same_dtype(ctx, 0, 2);
  check_dtype_in(ctx, 0, kEqualityDTypes);
  ctx.set_output(0, DType::Bool, broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_where(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::Bool)
    ctx.fail("condition must be bool, got " + std::string(dtype_name(ctx.input_dtype(0))));
  check_same_dtype(ctx, 1, 3);
  check_dtype_in(ctx, 1, kEqualityDTypes);
  Shape s = broadcast_shapes(ctx, ctx.input_shape(1), ctx.input_shape(2));
  ctx.set_output(0, ctx.input_dtype(1), broadcast_shapes(ctx, ctx.input_shape(0), s));
}

void infer_cast(InferContext& ctx) {
  ctx.set_output(0, ctx.attrs().get<DType>("dtype"), ctx.input_shape(0));
}

Cost transcendental_cost(const InferContext& ctx) {
  int64_t n = ctx.output(0).shape.num_elements();
  double e = n > 0 ? static_cast<double>(n) : 0;
  return {20 * e, 2 * e * dtype_size(ctx.output(0).dtype)};
}

void binary(const char* name, const char* display, InferFn infer, uint32_t extra = 0) {
  op_registry().add({.name = name, .display = display, .min_inputs = 2, .max_inputs = 2, .infer = infer,
                     .flags = kElementwise | extra});
}

void unary(const char* name, const char* display, InferFn infer, CostFn cost = nullptr, uint32_t extra = 0) {
  op_registry().add({.name = name, .display = display, .min_inputs = 1, .max_inputs = 1, .infer = infer,
                     .cost = cost, .flags = kElementwise | extra});
}

}  // namespace

void register_math_defs() {
  binary("Add", "add", infer_binary, kCommutative);
  binary("Sub", "sub", infer_binary);
  binary("Mul", "mul", infer_binary, kCommutative);
  binary("Div", "div", infer_binary);
  binary("Maximum", "maximum", infer_binary, kCommutative);
  binary("Minimum", "minimum", infer_binary, kCommutative);
  binary("Pow", "pow", infer_binary);

  unary("Neg", "neg", infer_unary_numeric);
  unary("Abs", "abs", infer_unary_numeric);
  unary("Sign", "sign", infer_unary_numeric);
  unary("Square", "square", infer_unary_numeric);
  unary("Exp", "exp", infer_unary_float, transcendental_cost);
  unary("Log", "log", infer_unary_float, transcendental_cost);
  unary("Erf", "erf", infer_unary_float, transcendental_cost);
  unary("Gelu", "gelu", infer_unary_float, transcendental_cost);
  unary("Sqrt", "sqrt", infer_unary_float, transcendental_cost);
  unary("Rsqrt", "rsqrt", infer_unary_float, transcendental_cost);

  binary("Equal", "equal", infer_equality, kCommutative | kNotDifferentiable);
  binary("NotEqual", "not_equal", infer_equality, kCommutative | kNotDifferentiable);
  binary("Less", "less", infer_compare, kNotDifferentiable);
  binary("LessEqual", "less_equal", infer_compare, kNotDifferentiable);
  binary("Greater", "greater", infer_compare, kNotDifferentiable);
  binary("GreaterEqual", "greater_equal", infer_compare, kNotDifferentiable);

  op_registry().add({.name = "Select", .display = "where", .min_inputs = 3, .max_inputs = 3, .infer = infer_where,
                     .flags = kElementwise, .kernel_dtype_input = 1});
  op_registry().add({.name = "Cast", .display = "cast", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"dtype", AttrType::Type}}, .infer = infer_cast, .flags = kElementwise});
}

}  // namespace weft::defs
