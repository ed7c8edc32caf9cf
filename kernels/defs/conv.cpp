// Definitions of the 2-D convolutions over NHWC images and their two gradients:
//   Conv2D(input [N,H,W,C], filter [kh,kw,C,F])            -> [N,OH,OW,F]
//   Conv2DBackpropInput(filter, dy [N,OH,OW,F])            -> [N,H,W,C]   attr input_sizes
//   Conv2DBackpropFilter(input, dy)                        -> [kh,kw,C,F] attr filter_sizes
// and the depthwise convolution (MobileNet's) with its two, each input channel convolved with
// its own `multiplier` filters:
//   DepthwiseConv2dNative(input [N,H,W,C], filter [kh,kw,C,M])  -> [N,OH,OW,C*M] (channel c*M+m)
//   DepthwiseConv2dNativeBackpropInput(filter, dy)              -> [N,H,W,C]   attr input_sizes
//   DepthwiseConv2dNativeBackpropFilter(input, dy)              -> [kh,kw,C,M] attr filter_sizes
// Attributes shared by all six: strides {h, w}, padding SAME / VALID / EXPLICIT,
// explicit_paddings {top, bottom, left, right} (EXPLICIT only), dilations {h, w} (default 1, 1).
// The backprop ops take the shape they produce as an attribute (as TensorFlow's do), so their
// output shape is known in graph mode without the forward tensors.
#include <string>
#include <vector>

#include "kernels/conv_params.h"
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void check_rank4(const InferContext& ctx, int input, const char* what) {
  const Shape& s = ctx.input_shape(input);
  if (s.rank() != 4)
    ctx.fail(std::string(what) + " must have rank 4, got shape " + s.to_string() + " (inputs: " +
             describe_inputs(ctx) + ")");
}

ConvWindow read_window(const InferContext& ctx) {
  ConvWindow w;
  std::string why;
  if (!read_conv_window(ctx.attrs(), &w, &why)) ctx.fail(why);
  return w;
}

// Two dims that must agree when both are known.
bool dims_differ(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

std::vector<int64_t> read_sizes(const InferContext& ctx, const char* attr, bool batch_may_be_unknown) {
  const auto sizes = ctx.attrs().get<std::vector<int64_t>>(attr);
  bool ok = sizes.size() == 4;
  for (size_t i = 0; ok && i < 4; ++i) ok = sizes[i] >= 0 || (i == 0 && batch_may_be_unknown && sizes[i] == -1);
  if (!ok)
    ctx.fail(std::string(attr) + " must be four sizes" + (batch_may_be_unknown ? " (the first may be -1)" : "") +
             ", got " + conv_int_list(sizes));
  return sizes;
}

// The output's channels: the filter's last dim, or for a depthwise filter [kh, kw, C, M] C * M.
int64_t output_channels(const Shape& filter, bool depthwise) {
  if (!depthwise) return filter[3];
  return filter[2] >= 0 && filter[3] >= 0 ? filter[2] * filter[3] : -1;
}

// The whole problem, checked: channels agree, the window fits, dy (when given) has the output's shape.
ConvParams check_problem(const InferContext& ctx, const Shape& x, const Shape& filter, const Shape* dy,
                         bool depthwise = false) {
  const ConvWindow win = read_window(ctx);
  if (dims_differ(x[3], filter[2]))
    ctx.fail("input channels " + std::to_string(x[3]) + " differ from the filter's input channels " +
             std::to_string(filter[2]) + ": input " + x.to_string() + ", filter " + filter.to_string());
  if ((filter[0] >= 0 && filter[0] < 1) || (filter[1] >= 0 && filter[1] < 1))
    ctx.fail("the filter's window must be at least 1 x 1, got filter " + filter.to_string());
  const int64_t f = output_channels(filter, depthwise);
  ConvParams p;
  if (!conv_params(win, x[0], x[1], x[2], x[3], filter[0], filter[1], f, &p))
    ctx.fail("the filter's window " + std::to_string(filter[0]) + " x " + std::to_string(filter[1]) +
             " (dilations " + std::to_string(win.dilation_h) + ", " + std::to_string(win.dilation_w) +
             ") is larger than the " + padding_name(win.padding) + "-padded input " + x.to_string() +
             "; filter " + filter.to_string());
  if (dy) {
    const Shape& d = *dy;
    if (dims_differ(d[0], x[0]) || dims_differ(d[1], p.oh) || dims_differ(d[2], p.ow) || dims_differ(d[3], f))
      ctx.fail("dy has shape " + d.to_string() + " where the convolution of input " + x.to_string() +
               " by filter " + filter.to_string() + " gives [" + std::to_string(x[0]) + ", " + std::to_string(p.oh) +
               ", " + std::to_string(p.ow) + ", " + std::to_string(f) + "]");
  }
  return p;
}

void check_dtypes(const InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_same_dtype(ctx, 0, 2);
}

void infer_forward(InferContext& ctx, bool depthwise) {
  check_dtypes(ctx);
  check_rank4(ctx, 0, "input");
  check_rank4(ctx, 1, "filter");
  const Shape& x = ctx.input_shape(0);
  const Shape& f = ctx.input_shape(1);
  const ConvParams p = check_problem(ctx, x, f, nullptr, depthwise);
  ctx.set_output(0, ctx.input_dtype(0), Shape{x[0], p.oh, p.ow, output_channels(f, depthwise)});
}

void infer_conv2d(InferContext& ctx) { infer_forward(ctx, false); }
void infer_depthwise(InferContext& ctx) { infer_forward(ctx, true); }

// FusedConv2D(input, filter, bias): activation(Conv2D(input, filter) + bias), made by the fusion
// pass (scheduler/passes/fuse_elementwise.cpp) from a Conv2D, the Add of a bias of [F] and a
// Relu, never written by users (it has no gradient: fusion runs after gradients are built).
void infer_fused_conv2d(InferContext& ctx) {
  check_dtype_in(ctx, 0, kFloatingOrHalf);
  check_same_dtype(ctx, 0, 3);
  infer_conv2d(ctx);
  const Shape& bias = ctx.input_shape(2);
  const int64_t f = ctx.input_shape(1)[3];
  if (bias.rank() != 1 || dims_differ(bias[0], f))
    ctx.fail("bias must have shape (" + std::to_string(f) + ",), the filter's output channels, got " +
             bias.to_string());
  const std::string& act = ctx.attrs().get_or<std::string>("activation", "");
  if (act != "" && act != "relu") ctx.fail("activation must be \"\" or \"relu\", got \"" + act + "\"");
}

void infer_input_gradient(InferContext& ctx, bool depthwise) {
  check_dtypes(ctx);
  check_rank4(ctx, 0, "filter");
  check_rank4(ctx, 1, "dy");
  std::vector<int64_t> sizes = read_sizes(ctx, "input_sizes", true);
  if (sizes[0] < 0) sizes[0] = ctx.input_shape(1)[0];
  const Shape x(sizes);
  const Shape& dy = ctx.input_shape(1);
  check_problem(ctx, x, ctx.input_shape(0), &dy, depthwise);
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_filter_gradient(InferContext& ctx, bool depthwise) {
  check_dtypes(ctx);
  check_rank4(ctx, 0, "input");
  check_rank4(ctx, 1, "dy");
  const Shape f(read_sizes(ctx, "filter_sizes", false));
  const Shape& dy = ctx.input_shape(1);
  check_problem(ctx, ctx.input_shape(0), f, &dy, depthwise);
  ctx.set_output(0, ctx.input_dtype(0), f);
}

void infer_backprop_input(InferContext& ctx) { infer_input_gradient(ctx, false); }
void infer_backprop_filter(InferContext& ctx) { infer_filter_gradient(ctx, false); }
void infer_depthwise_backprop_input(InferContext& ctx) { infer_input_gradient(ctx, true); }
void infer_depthwise_backprop_filter(InferContext& ctx) { infer_filter_gradient(ctx, true); }

// 2 * N * OH * OW * kh * kw * C * F for each of the three (each is one product of that size);
// bytes are the inputs and the output once each. Unknown dims count as 1.
Cost conv_cost(const InferContext& ctx) {
  auto known = [](int64_t d) { return static_cast<double>(d < 0 ? 1 : d); };
  auto bytes = [&](const Shape& s, DType t) {
    double e = 1;
    for (int64_t i = 0; i < s.rank(); ++i) e *= known(s[i]);
    return e * static_cast<double>(dtype_size(t));
  };
  const std::string& name = ctx.op().name;
  // The image [N,H,W,C], the filter [kh,kw,C,F] and the output [N,OH,OW,F] of the forward problem
  // (for a depthwise one the filter [kh,kw,C,M] and the output [N,OH,OW,C*M]).
  const Shape& out = ctx.output(0).shape;
  const Shape& in0 = ctx.input_shape(0);
  const Shape& in1 = ctx.input_shape(1);
  const bool input_gradient = name == "Conv2DBackpropInput" || name == "DepthwiseConv2dNativeBackpropInput";
  const Shape& image = input_gradient ? out : in0;
  const bool forward = name == "Conv2D" || name == "FusedConv2D" || name == "DepthwiseConv2dNative";
  const Shape& filter = forward ? in1 : (input_gradient ? in0 : out);
  const Shape& y = forward ? out : in1;
  // C * F products of kh * kw for Conv2D; C * M of them for a depthwise convolution, whose
  // output value sums one channel's window: the same expression.
  double flops = 2 * known(y[0]) * known(y[1]) * known(y[2]) * known(filter[0]) * known(filter[1]) *
                 known(image[3]) * known(filter[3]);
  const DType t = ctx.output(0).dtype;
  return {flops, bytes(in0, t) + bytes(in1, t) + bytes(out, t)};
}

std::vector<AttrSpec> window_attrs() {
  return {{"strides", AttrType::IntList},
          {"padding", AttrType::String},
          {"explicit_paddings", AttrType::IntList, false},
          {"dilations", AttrType::IntList, false}};
}

}  // namespace

void register_conv_defs() {
  op_registry().add({.name = "Conv2D", .display = "conv2d", .min_inputs = 2, .max_inputs = 2,
                     .attrs = window_attrs(), .infer = infer_conv2d, .cost = conv_cost});
  auto fused_attrs = window_attrs();
  fused_attrs.push_back({"activation", AttrType::String, false});
  op_registry().add({.name = "FusedConv2D", .display = "fused_conv2d", .min_inputs = 3, .max_inputs = 3,
                     .attrs = fused_attrs, .infer = infer_fused_conv2d, .cost = conv_cost,
                     .flags = kNotDifferentiable});
  auto input_attrs = window_attrs();
  input_attrs.push_back({"input_sizes", AttrType::IntList});
  op_registry().add({.name = "Conv2DBackpropInput", .display = "conv2d_backprop_input", .min_inputs = 2,
                     .max_inputs = 2, .attrs = input_attrs, .infer = infer_backprop_input, .cost = conv_cost});
  auto filter_attrs = window_attrs();
  filter_attrs.push_back({"filter_sizes", AttrType::IntList});
  op_registry().add({.name = "Conv2DBackpropFilter", .display = "conv2d_backprop_filter", .min_inputs = 2,
                     .max_inputs = 2, .attrs = filter_attrs, .infer = infer_backprop_filter, .cost = conv_cost});
  op_registry().add({.name = "DepthwiseConv2dNative", .display = "depthwise_conv2d", .min_inputs = 2,
                     .max_inputs = 2, .attrs = window_attrs(), .infer = infer_depthwise, .cost = conv_cost});
  op_registry().add({.name = "DepthwiseConv2dNativeBackpropInput", .display = "depthwise_conv2d_backprop_input",
                     .min_inputs = 2, .max_inputs = 2, .attrs = input_attrs, .infer = infer_depthwise_backprop_input,
                     .cost = conv_cost});
  op_registry().add({.name = "DepthwiseConv2dNativeBackpropFilter", .display = "depthwise_conv2d_backprop_filter",
                     .min_inputs = 2, .max_inputs = 2, .attrs = filter_attrs,
                     .infer = infer_depthwise_backprop_filter, .cost = conv_cost});
}

}  // namespace weft::defs
