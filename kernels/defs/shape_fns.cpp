#include "kernels/defs/shape_fns.h"

#include <algorithm>

namespace weft::defs {

std::string describe_inputs(const InferContext& ctx) {
  std::string s;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (i) s += ", ";
    s += std::string(dtype_name(ctx.input_dtype(i))) + " " + ctx.input_shape(i).to_string();
  }
  return s;
}

Shape broadcast_shapes(const InferContext& ctx, const Shape& a, const Shape& b) {
  if (a == b) return a;
  int64_t r = std::max(a.rank(), b.rank());
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    int64_t d;
    if (da == db) d = da;
    else if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da < 0) d = db;  // unknown: trust the known side; checked again at run time
    else if (db < 0) d = da;
    else ctx.fail("shapes " + a.to_string() + " and " + b.to_string() + " are not broadcastable (inputs: " +
                  describe_inputs(ctx) + ")");
    out.push_back(d);
  }
  return out;
}

int64_t normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank || rank == 0) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank) +
             (rank ? " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")" : ""));
  }
  return axis < 0 ? axis + rank : axis;
}

std::string dtype_list(std::initializer_list<DType> dtypes) {
  std::string s;
  for (DType d : dtypes) {
    if (!s.empty()) s += ", ";
    s += dtype_name(d);
  }
  return s;
}

void check_dtype_in(const InferContext& ctx, int input, std::initializer_list<DType> allowed) {
  DType d = ctx.input_dtype(input);
  if (std::find(allowed.begin(), allowed.end(), d) == allowed.end())
    ctx.fail("dtype " + std::string(dtype_name(d)) + " is not supported (input " + std::to_string(input) +
             " with shape " + ctx.input_shape(input).to_string() + "; supported: " + dtype_list(allowed) + ")");
}

void check_same_dtype(const InferContext& ctx, int first, int last) {
  for (int i = first + 1; i < last; ++i) {
    if (ctx.input_dtype(i) != ctx.input_dtype(first))
      ctx.fail("dtypes differ: " + std::string(dtype_name(ctx.input_dtype(first))) + " " +
               ctx.input_shape(first).to_string() + " and " + std::string(dtype_name(ctx.input_dtype(i))) + " " +
               ctx.input_shape(i).to_string() + " (cast one of them first)");
  }
}

void infer_same_as_input(InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0)); }

void infer_unary_numeric(InferContext& ctx) {
  check_dtype_in(ctx, 0, kRealNumericOrHalf);
  infer_same_as_input(ctx);
}

void infer_unary_float(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  infer_same_as_input(ctx);
}

}  // namespace weft::defs
