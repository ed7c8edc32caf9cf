// The attributes of Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter read once into plain
// numbers, for their definitions (which validate) and their kernels on every device (which trust
// what the definition accepted). The window arithmetic itself is window_geometry.h's.
//
//   std::string why;
//   ConvWindow w;
//   if (!read_conv_window(attrs, &w, &why)) fail(why);
//   ConvParams p = conv_params(w, n, h, w, c, kh, kw, f);   // p.oh, p.ow, p.g.pad_top, ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/window_geometry.h"
#include "runtime/attr.h"

namespace weft {

// Strides, dilations and padding, without the window (the filter gives it).
struct ConvWindow {
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  PaddingMode padding = PaddingMode::Valid;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // EXPLICIT only
};

// The whole problem: input [n, h, w, c], filter [kh, kw, c / groups, f], output [n, oh, ow, f].
// With groups > 1, output channel j reads input channels [g * c / groups, (g + 1) * c / groups)
// for g = j / (f / groups) only. A depthwise convolution (DepthwiseConv2dNative, filter
// [kh, kw, C, M]) is the case groups = c: one input channel per group, its filter the same bytes
// as [kh, kw, 1, C * M], output channel c * M + m.
struct ConvParams {
  int64_t n = 0, h = 0, w = 0, c = 0, kh = 0, kw = 0, f = 0, oh = 0, ow = 0;
  ConvWindow win;
  WindowGeometry g;  // padding as applied (SAME resolved)
  int64_t groups = 1;
  int64_t group_in() const { return groups > 1 ? c / groups : c; }  // input channels per group
};

inline std::string conv_int_list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// False, with the reason in *why (naming the attribute), when an attribute is malformed.
inline bool read_conv_window(const Attrs& attrs, ConvWindow* w, std::string* why) {
  const auto strides = attrs.get_or<std::vector<int64_t>>("strides", {1, 1});
  const auto dilations = attrs.get_or<std::vector<int64_t>>("dilations", {1, 1});
  const auto padding = attrs.get_or<std::string>("padding", "VALID");
  const auto explicit_paddings = attrs.get_or<std::vector<int64_t>>("explicit_paddings", {});
  if (strides.size() != 2 || strides[0] < 1 || strides[1] < 1) {
    *why = "strides must be two positive numbers {height, width}, got " + conv_int_list(strides);
    return false;
  }
  if (dilations.size() != 2 || dilations[0] < 1 || dilations[1] < 1) {
    *why = "dilations must be two positive numbers {height, width}, got " + conv_int_list(dilations);
    return false;
  }
  if (!parse_padding(padding, &w->padding)) {
    *why = "padding must be \"SAME\", \"VALID\" or \"EXPLICIT\", got \"" + padding + "\"";
    return false;
  }
  if (w->padding == PaddingMode::Explicit) {
    bool ok = explicit_paddings.size() == 4;
    for (int64_t p : explicit_paddings) ok = ok && p >= 0;
    if (!ok) {
      *why = "explicit_paddings must be four non-negative numbers {top, bottom, left, right} with EXPLICIT "
             "padding, got " + conv_int_list(explicit_paddings);
      return false;
    }
    w->pad_top = explicit_paddings[0];
    w->pad_bottom = explicit_paddings[1];
    w->pad_left = explicit_paddings[2];
    w->pad_right = explicit_paddings[3];
  } else if (!explicit_paddings.empty()) {
    *why = "explicit_paddings " + conv_int_list(explicit_paddings) + " given with " + padding + " padding";
    return false;
  }
  w->stride_h = strides[0];
  w->stride_w = strides[1];
  w->dilation_h = dilations[0];
  w->dilation_w = dilations[1];
  return true;
}

inline WindowSpec conv_window_spec(const ConvWindow& w, int64_t kh, int64_t kw) {
  return {.window_h = kh, .window_w = kw, .stride_h = w.stride_h, .stride_w = w.stride_w,
          .dilation_h = w.dilation_h, .dilation_w = w.dilation_w, .padding = w.padding,
          .pad_top = w.pad_top, .pad_bottom = w.pad_bottom, .pad_left = w.pad_left, .pad_right = w.pad_right};
}

// False when the (dilated) window does not fit the (padded) input. Dims may be -1 (then oh / ow are).
inline bool conv_params(const ConvWindow& win, int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh, int64_t kw,
                        int64_t f, ConvParams* p) {
  *p = {.n = n, .h = h, .w = w, .c = c, .kh = kh, .kw = kw, .f = f, .oh = 0, .ow = 0, .win = win, .g = {}};
  if (kh < 0 || kw < 0) {
    p->oh = p->ow = -1;
    return true;
  }
  if (!window_geometry(conv_window_spec(win, kh, kw), h, w, &p->g)) return false;
  p->oh = p->g.out_h;
  p->ow = p->g.out_w;
  return true;
}

}  // namespace weft
