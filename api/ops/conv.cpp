// Front-ends of the convolutions (api/ops/conv.h) and their gradients.
//
// With y = conv2d(x, w), a bilinear map, every gradient is one of the three ops again:
//   Conv2D(x, w)                 dx = BackpropInput(w, dy)      dw = BackpropFilter(x, dy)
//   BackpropInput(w, dy) = dx    d w = BackpropFilter(g, dy)    d dy = Conv2D(g, w)
//   BackpropFilter(x, dy) = dw   d x = BackpropInput(g, dy)     d dy = Conv2D(x, g)
// (g the incoming gradient): <g, BackpropInput(w, dy)> = <Conv2D(g, w), dy>, and
// <g, BackpropFilter(x, dy)> = <Conv2D(x, g), dy>, so each is the gradient of a Conv2D.
// Every gradient keeps the node's strides, padding and dilations as they were. The depthwise
// convolution is bilinear too, and its three ops (DepthwiseConv2dNative, ...BackpropInput,
// ...BackpropFilter) stand in the same relations.
#include "api/ops/conv.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/register_gradients.h"

namespace weft {

namespace {

Attrs window_attrs(std::vector<int64_t> strides, const std::string& padding, std::vector<int64_t> dilations) {
  return {{"strides", std::move(strides)}, {"padding", padding}, {"dilations", std::move(dilations)}};
}

// The window attributes of a node, for its gradient's ops.
Attrs window_attrs_of(const Attrs& attrs) {
  Attrs out;
  for (const char* name : {"strides", "padding", "explicit_paddings", "dilations"})
    if (const AttrValue* v = attrs.find(name)) out.set(name, *v);
  return out;
}

// The three ops of a convolution: Conv2D's, or the depthwise convolution's. Their gradients
// follow the same rules (above), each naming its own family's ops.
struct ConvOps {
  const char* forward;
  const char* input_gradient;
  const char* filter_gradient;
};
constexpr ConvOps kConv2D{"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"};
constexpr ConvOps kDepthwise{"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                             "DepthwiseConv2dNativeBackpropFilter"};

// Each family's ops are resolved once (a template per family, a static per template).
template <const ConvOps& kOps>
Tensor run_forward(const Tensor& x, const Tensor& filters, Attrs attrs, const SourceLocation& loc) {
  static const OpDef& op = op_def(kOps.forward);
  return dispatch1(op, {x, filters}, attrs, loc);
}

template <const ConvOps& kOps>
Tensor run_backprop_input(std::vector<int64_t> input_shape, const Tensor& filters, const Tensor& dy, Attrs attrs,
                          const SourceLocation& loc) {
  static const OpDef& op = op_def(kOps.input_gradient);
  attrs.set("input_sizes", std::move(input_shape));
  return dispatch1(op, {filters, dy}, attrs, loc);
}

template <const ConvOps& kOps>
Tensor run_backprop_filter(const Tensor& x, std::vector<int64_t> filter_shape, const Tensor& dy, Attrs attrs,
                           const SourceLocation& loc) {
  static const OpDef& op = op_def(kOps.filter_gradient);
  attrs.set("filter_sizes", std::move(filter_shape));
  return dispatch1(op, {x, dy}, attrs, loc);
}

Attrs explicit_window(std::vector<int64_t> strides, const ExplicitPadding& padding, std::vector<int64_t> dilations) {
  Attrs attrs = window_attrs(std::move(strides), "EXPLICIT", std::move(dilations));
  attrs.set("explicit_paddings", std::vector<int64_t>{padding.top, padding.bottom, padding.left, padding.right});
  return attrs;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides, const std::string& padding,
              std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_forward<kConv2D>(x, filters, window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides, const ExplicitPadding& padding,
              std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_forward<kConv2D>(x, filters, explicit_window(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor conv2d_backprop_input(const std::vector<int64_t>& input_shape, const Tensor& filters, const Tensor& dy,
                             std::vector<int64_t> strides, const std::string& padding,
                             std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_backprop_input<kConv2D>(input_shape, filters, dy,
                                     window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor conv2d_backprop_filter(const Tensor& x, const std::vector<int64_t>& filter_shape, const Tensor& dy,
                              std::vector<int64_t> strides, const std::string& padding,
                              std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_backprop_filter<kConv2D>(x, filter_shape, dy,
                                      window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides,
                        const std::string& padding, std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_forward<kDepthwise>(x, filters, window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides,
                        const ExplicitPadding& padding, std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_forward<kDepthwise>(x, filters, explicit_window(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor depthwise_conv2d_backprop_input(const std::vector<int64_t>& input_shape, const Tensor& filters,
                                       const Tensor& dy, std::vector<int64_t> strides, const std::string& padding,
                                       std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_backprop_input<kDepthwise>(input_shape, filters, dy,
                                        window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

Tensor depthwise_conv2d_backprop_filter(const Tensor& x, const std::vector<int64_t>& filter_shape, const Tensor& dy,
                                        std::vector<int64_t> strides, const std::string& padding,
                                        std::vector<int64_t> dilations, const SourceLocation& loc) {
  return run_backprop_filter<kDepthwise>(x, filter_shape, dy,
                                         window_attrs(std::move(strides), padding, std::move(dilations)), loc);
}

namespace {

// A tensor's shape as a backprop op's size attribute. The batch may be unknown while tracing
// (the op then takes it from dy); the other dims of a convolution's operands are known.
std::vector<int64_t> sizes_of(const Tensor& t) { return t.shape().to_vector(); }

template <const ConvOps& kOps>
std::vector<Tensor> forward_grad(const GradContext& g) {
  const Attrs w = window_attrs_of(g.attrs);
  const Tensor &x = g.input(0), &filters = g.input(1), &dy = g.grad();
  Tensor dx, dw;
  if (g.needs(0)) dx = run_backprop_input<kOps>(sizes_of(x), filters, dy, w, SourceLocation::current());
  if (g.needs(1)) dw = run_backprop_filter<kOps>(x, sizes_of(filters), dy, w, SourceLocation::current());
  return {dx, dw};
}

template <const ConvOps& kOps>
std::vector<Tensor> backprop_input_grad(const GradContext& g) {
  const Attrs w = window_attrs_of(g.attrs);
  const Tensor &filters = g.input(0), &dy = g.input(1), &ddx = g.grad();
  Tensor d_filters, d_dy;
  if (g.needs(0)) d_filters = run_backprop_filter<kOps>(ddx, sizes_of(filters), dy, w, SourceLocation::current());
  if (g.needs(1)) d_dy = run_forward<kOps>(ddx, filters, w, SourceLocation::current());
  return {d_filters, d_dy};
}

template <const ConvOps& kOps>
std::vector<Tensor> backprop_filter_grad(const GradContext& g) {
  const Attrs w = window_attrs_of(g.attrs);
  const Tensor &x = g.input(0), &dy = g.input(1), &ddw = g.grad();
  Tensor d_x, d_dy;
  if (g.needs(0)) d_x = run_backprop_input<kOps>(sizes_of(x), ddw, dy, w, SourceLocation::current());
  if (g.needs(1)) d_dy = run_forward<kOps>(x, ddw, w, SourceLocation::current());
  return {d_x, d_dy};
}

template <const ConvOps& kOps>
void register_family() {
  register_gradient(kOps.forward, forward_grad<kOps>);
  register_gradient(kOps.input_gradient, backprop_input_grad<kOps>);
  register_gradient(kOps.filter_gradient, backprop_filter_grad<kOps>);
}

}  // namespace

void register_conv_gradients() {
  register_family<kConv2D>();
  register_family<kDepthwise>();
}

}  // namespace weft
