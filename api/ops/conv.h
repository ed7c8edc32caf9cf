// Convolutions over NHWC images, TensorFlow's layout and arithmetic.
//
//   Tensor y = conv2d(x, filters);                                  // [N,H,W,C] * [kh,kw,C,F]
//   Tensor y = conv2d(x, filters, {2, 2}, "SAME");                  // out = ceil(in / stride)
//   Tensor y = conv2d(x, filters, {1, 1}, ExplicitPadding{1, 1, 2, 2}, {2, 2});  // dilated
//   Tensor d = depthwise_conv2d(x, filters, {1, 1}, "SAME");       // [kh,kw,C,multiplier]
//
// Strides and dilations are {height, width}; padding is "SAME" or "VALID" (any case), or explicit
// rows and columns added at the top, bottom, left and right. SAME pads so the output is
// ceil(in / stride), the odd row or column at the bottom / right, as TensorFlow does.
// Their gradients are ops of their own (Conv2DBackpropInput, Conv2DBackpropFilter), themselves
// differentiable, so nested tapes give second-order gradients.
//
// depthwise_conv2d (tf.nn.depthwise_conv2d, MobileNet's): each of the C input channels convolved
// with its own M filters of [kh, kw, C, M], giving C * M channels, channel c * M + m from input
// channel c; the same windows, padding and gradients (DepthwiseConv2dNative and its two).
#pragma once

#include <string>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

struct ExplicitPadding {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};

Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides = {1, 1},
              const std::string& padding = "VALID", std::vector<int64_t> dilations = {1, 1},
              const SourceLocation& loc = SourceLocation::current());
Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides, const ExplicitPadding& padding,
              std::vector<int64_t> dilations = {1, 1}, const SourceLocation& loc = SourceLocation::current());

// The gradients of conv2d as ops users may call (tf.nn.conv2d_transpose is the first):
// input_shape is x's [N, H, W, C] (N may be -1: taken from dy), filter_shape [kh, kw, C, F].
Tensor conv2d_backprop_input(const std::vector<int64_t>& input_shape, const Tensor& filters, const Tensor& dy,
                             std::vector<int64_t> strides, const std::string& padding,
                             std::vector<int64_t> dilations = {1, 1},
                             const SourceLocation& loc = SourceLocation::current());
Tensor conv2d_backprop_filter(const Tensor& x, const std::vector<int64_t>& filter_shape, const Tensor& dy,
                              std::vector<int64_t> strides, const std::string& padding,
                              std::vector<int64_t> dilations = {1, 1},
                              const SourceLocation& loc = SourceLocation::current());

Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides = {1, 1},
                        const std::string& padding = "VALID", std::vector<int64_t> dilations = {1, 1},
                        const SourceLocation& loc = SourceLocation::current());
Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, std::vector<int64_t> strides,
                        const ExplicitPadding& padding, std::vector<int64_t> dilations = {1, 1},
                        const SourceLocation& loc = SourceLocation::current());
// Its gradients as ops: input_shape [N, H, W, C] (N may be -1), filter_shape [kh, kw, C, M].
Tensor depthwise_conv2d_backprop_input(const std::vector<int64_t>& input_shape, const Tensor& filters,
                                       const Tensor& dy, std::vector<int64_t> strides, const std::string& padding,
                                       std::vector<int64_t> dilations = {1, 1},
                                       const SourceLocation& loc = SourceLocation::current());
Tensor depthwise_conv2d_backprop_filter(const Tensor& x, const std::vector<int64_t>& filter_shape, const Tensor& dy,
                                        std::vector<int64_t> strides, const std::string& padding,
                                        std::vector<int64_t> dilations = {1, 1},
                                        const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
