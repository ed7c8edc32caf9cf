// Definitions of the pooling ops over NHWC images (rank 4): MaxPool and AvgPool, attrs "ksize"
// and "strides" ({height, width}) and "padding" (SAME / VALID), and their gradients as ops of
// their own, so that a graph's backward pass and second-order gradients run one kernel each:
//   MaxPoolGrad(x, y, dy) -> dx           dy goes to the first maximum of each window; with
//                                         "activation" "relu" (graph fusion sets it, x being a
//                                         relu's output) dx is then ReluGrad(dx, x)
//   MaxPoolGradGrad(x, y, ddx) -> ddy     ddx read back at those same maxima
//   AvgPoolGrad(dy[, x]), attr "input_sizes" [N, H, W, C] (N may be -1: dy's) -> dx; x, given
//       only when the forward input's shape was not known when the gradient was built (a trace
//       with unknown dims), supplies the sizes input_sizes leaves unknown (-1) when it runs
// y (max pooling's output) is taken for TensorFlow's signature and shape-checked; the kernels
// find the maxima from x, so a y that was rounded (float16) cannot disagree with x about them.
#include <string>
#include <vector>

#include "kernels/activation_attr.h"
#include "kernels/defs/shape_fns.h"
#include "kernels/pooling_window.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

const std::vector<AttrSpec> kPoolAttrs = {
    {"ksize", AttrType::IntList}, {"strides", AttrType::IntList}, {"padding", AttrType::String}};

std::string attrs_text(const InferContext& ctx) {
  return "ksize " + pool_int_list(ctx.attrs().get<std::vector<int64_t>>("ksize")) + ", strides " +
         pool_int_list(ctx.attrs().get<std::vector<int64_t>>("strides")) + ", padding \"" +
         ctx.attrs().get<std::string>("padding") + "\"";
}

// The pooled shape of the NHWC input `in` (unknown dims stay unknown), after checking the
// attributes and the input's rank; `what` names the input in messages.
Shape pooled_shape(const InferContext& ctx, const Shape& in, DType dtype, const std::string& what) {
  WindowSpec spec;
  std::string error;
  if (!pool_window_spec(ctx.attrs(), &spec, &error)) ctx.fail(error);
  if (in.rank() != 4)
    ctx.fail("expects a rank-4 NHWC " + what + ", got " + std::string(dtype_name(dtype)) + " " + in.to_string());
  WindowGeometry g;
  if (!window_geometry(spec, in[1], in[2], &g))
    ctx.fail("the window (" + attrs_text(ctx) + ") is larger than the " + what + " " +
             std::string(dtype_name(dtype)) + " " + in.to_string());
  return Shape{in[0], g.out_h, g.out_w, in[3]};
}

// Shapes that may still hold unknown dims agree where both are known.
bool compatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

void infer_pool(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  ctx.set_output(0, ctx.input_dtype(0), pooled_shape(ctx, ctx.input_shape(0), ctx.input_dtype(0), "input"));
}

// MaxPoolGrad(x, y, dy) -> dx of x's shape; MaxPoolGradGrad(x, y, ddx) -> ddy of y's shape.
void check_max_pool_grad_inputs(InferContext& ctx, const Shape& pooled) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_same_dtype(ctx, 0, 3);
  if (!compatible(ctx.input_shape(1), pooled))
    ctx.fail("the pooled output y " + ctx.input_shape(1).to_string() + " does not match the input x " +
             ctx.input_shape(0).to_string() + " pooled with " + attrs_text(ctx) + ": " + pooled.to_string());
}

void infer_max_pool_grad(InferContext& ctx) {
  const Shape pooled = pooled_shape(ctx, ctx.input_shape(0), ctx.input_dtype(0), "input x");
  check_max_pool_grad_inputs(ctx, pooled);
  checked_relu_activation(ctx);
  if (!compatible(ctx.input_shape(2), pooled))
    ctx.fail("the gradient dy " + ctx.input_shape(2).to_string() + " does not match the pooled shape " +
             pooled.to_string() + " of x " + ctx.input_shape(0).to_string());
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

void infer_max_pool_grad_grad(InferContext& ctx) {
  const Shape pooled = pooled_shape(ctx, ctx.input_shape(0), ctx.input_dtype(0), "input x");
  check_max_pool_grad_inputs(ctx, pooled);
  if (!compatible(ctx.input_shape(2), ctx.input_shape(0)))
    ctx.fail("the gradient's gradient ddx " + ctx.input_shape(2).to_string() + " does not match x " +
             ctx.input_shape(0).to_string());
  // Where x's dims are unknown, y may still know the pooled ones.
  std::vector<int64_t> out = pooled.to_vector();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] < 0) out[i] = ctx.input_shape(1)[static_cast<int64_t>(i)];
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

// dx has input_sizes' shape; a -1 there is taken from the optional x, else (N and C) from dy. H
// and W cannot come from dy (SAME maps several heights onto one pooled height): without x they
// stay unknown here and the kernels refuse to run.
void infer_avg_pool_grad(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  std::vector<int64_t> sizes = ctx.attrs().get<std::vector<int64_t>>("input_sizes");
  if (ctx.num_inputs() == 2 && sizes.size() == 4 && ctx.input_shape(1).rank() == 4)
    for (size_t i = 0; i < 4; ++i)
      if (sizes[i] < 0) sizes[i] = ctx.input_shape(1)[static_cast<int64_t>(i)];
  if (sizes.size() != 4)
    ctx.fail("input_sizes must be the input's [N, H, W, C], got " + pool_int_list(sizes));
  const Shape& dy = ctx.input_shape(0);
  if (dy.rank() != 4)
    ctx.fail("expects a rank-4 NHWC gradient dy, got " + std::string(dtype_name(ctx.input_dtype(0))) + " " +
             dy.to_string());
  const Shape in{sizes[0] < 0 ? dy[0] : sizes[0], sizes[1] < 0 ? -1 : sizes[1], sizes[2] < 0 ? -1 : sizes[2],
                 sizes[3] < 0 ? dy[3] : sizes[3]};
  const Shape pooled = pooled_shape(ctx, in, ctx.input_dtype(0), "input_sizes");
  if (!compatible(dy, pooled))
    ctx.fail("the gradient dy " + dy.to_string() + " does not match input_sizes " + pool_int_list(sizes) +
             " pooled with " + attrs_text(ctx) + ": " + pooled.to_string());
  ctx.set_output(0, ctx.input_dtype(0), in);
}

// Each output element reads one window: ksize flops per output (the default, one per element,
// would price a 3x3 pool like an add).
Cost pool_cost(const InferContext& ctx) {
  const std::vector<int64_t>& k = ctx.attrs().get<std::vector<int64_t>>("ksize");
  const double window = k.size() == 2 ? static_cast<double>(k[0] * k[1]) : 1.0;
  double bytes = 0, elements = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t n = ctx.input_shape(i).num_elements();
    if (n > 0) bytes += static_cast<double>(n) * dtype_size(ctx.input_dtype(i));
  }
  const int64_t out = ctx.output(0).shape.num_elements();
  if (out > 0) {
    elements = static_cast<double>(out);
    bytes += elements * dtype_size(ctx.output(0).dtype);
  }
  return {window * elements, bytes};
}

}  // namespace

void register_pooling_defs() {
  op_registry().add({.name = "MaxPool", .display = "max_pool2d", .min_inputs = 1, .max_inputs = 1,
                     .attrs = kPoolAttrs, .infer = infer_pool, .cost = pool_cost});
  op_registry().add({.name = "AvgPool", .display = "avg_pool2d", .min_inputs = 1, .max_inputs = 1,
                     .attrs = kPoolAttrs, .infer = infer_pool, .cost = pool_cost});
  std::vector<AttrSpec> max_grad_attrs = kPoolAttrs;
  max_grad_attrs.push_back({"activation", AttrType::String, false});
  op_registry().add({.name = "MaxPoolGrad", .display = "max_pool2d_grad", .min_inputs = 3, .max_inputs = 3,
                     .attrs = max_grad_attrs, .infer = infer_max_pool_grad, .cost = pool_cost});
  op_registry().add({.name = "MaxPoolGradGrad", .display = "max_pool2d_grad_grad", .min_inputs = 3,
                     .max_inputs = 3, .attrs = kPoolAttrs, .infer = infer_max_pool_grad_grad, .cost = pool_cost});
  std::vector<AttrSpec> avg_grad_attrs = kPoolAttrs;
  avg_grad_attrs.push_back({"input_sizes", AttrType::IntList});
  op_registry().add({.name = "AvgPoolGrad", .display = "avg_pool2d_grad", .min_inputs = 1, .max_inputs = 2,
                     .attrs = avg_grad_attrs, .infer = infer_avg_pool_grad, .cost = pool_cost});
}

}  // namespace weft::defs
