// Definitions of the reduce ops: Sum, Mean, Max, Min (attrs "axes", "keepdims") and ArgMax
// (attr "axis").
#include <algorithm>
#include <vector>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Max and Min have no identity element, so reducing nothing has no answer; Sum and Mean do.
void infer_reduction(InferContext& ctx, bool needs_elements) {
  check_dtype_in(ctx, 0, kRealNumericOrHalf);
  const Shape& in = ctx.input_shape(0);
  const int64_t rank = in.rank();
  const AttrValue* axes_attr = ctx.attrs().find("axes");
  static const std::vector<int64_t> kAll;
  const std::vector<int64_t>& axes = axes_attr ? ctx.attrs().get<std::vector<int64_t>>("axes") : kAll;
  const bool keepdims = ctx.attrs().get_or<bool>("keepdims", false);

  std::vector<char> reduced(static_cast<size_t>(rank), axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    const int64_t k = normalize_axis(ctx, a, rank);
    if (reduced[k])
      ctx.fail("axis " + std::to_string(a) + " is repeated in axes " + int_list(axes) + " (dim " + std::to_string(k) +
               " of a tensor of rank " + std::to_string(rank) + " is named twice)");
    reduced[k] = 1;
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[i] && in[i] == 0 && needs_elements)
      ctx.fail("cannot reduce over an empty axis: axis " + std::to_string(i) + " of shape " + in.to_string() +
               " has size 0 and the reduction has no identity");
    if (!reduced[i]) out.push_back(in[i]);
    else if (keepdims) out.push_back(1);
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_sum(InferContext& ctx) { infer_reduction(ctx, false); }
void infer_extreme(InferContext& ctx) { infer_reduction(ctx, true); }

void infer_argmax(InferContext& ctx) {
  check_dtype_in(ctx, 0, kRealNumericOrHalf);
  const Shape& in = ctx.input_shape(0);
  const int64_t axis = normalize_axis(ctx, ctx.attrs().get<int64_t>("axis"), in.rank());
  if (in[axis] == 0)
    ctx.fail("cannot take the argmax over an empty axis: axis " + std::to_string(axis) + " of shape " +
             in.to_string() + " has size 0");
  Shape out;
  for (int64_t i = 0; i < in.rank(); ++i)
    if (i != axis) out.push_back(in[i]);
  ctx.set_output(0, DType::Int64, std::move(out));
}

// Every input element is read and combined once; the default cost counts output elements, which
// for a full reduction would be one.
Cost reduce_cost(const InferContext& ctx) {
  const int64_t in = ctx.input_shape(0).num_elements();
  const int64_t out = ctx.output(0).shape.num_elements();
  Cost c;
  if (in > 0) {
    c.flops = static_cast<double>(in);
    c.bytes = static_cast<double>(in) * dtype_size(ctx.input_dtype(0));
  }
  if (out > 0) c.bytes += static_cast<double>(out) * dtype_size(ctx.output(0).dtype);
  return c;
}

void reduction(const char* name, const char* display, InferFn infer) {
  op_registry().add({.name = name, .display = display, .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"axes", AttrType::IntList, false}, {"keepdims", AttrType::Bool, false}},
                     .infer = infer, .cost = reduce_cost});
}

}  // namespace

void register_reduce_defs() {
  reduction("Sum", "reduce_sum", infer_sum);
  reduction("Mean", "reduce_mean", infer_sum);
  reduction("Max", "reduce_max", infer_extreme);
  reduction("Min", "reduce_min", infer_extreme);
  op_registry().add({.name = "ArgMax", .display = "argmax", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"axis", AttrType::Int}}, .infer = infer_argmax, .cost = reduce_cost,
                     .flags = kNotDifferentiable});
}

}  // namespace weft::defs
