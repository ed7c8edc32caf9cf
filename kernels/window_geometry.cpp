#include "kernels/window_geometry.h"

#include <algorithm>
#include <cctype>

namespace weft {

bool parse_padding(const std::string& text, PaddingMode* mode) {
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  if (upper == "SAME") *mode = PaddingMode::Same;
  else if (upper == "VALID") *mode = PaddingMode::Valid;
  else if (upper == "EXPLICIT") *mode = PaddingMode::Explicit;
  else return false;
  return true;
}

const char* padding_name(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::Same: return "SAME";
    case PaddingMode::Valid: return "VALID";
    case PaddingMode::Explicit: return "EXPLICIT";
  }
  return "?";
}

bool window_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation, PaddingMode mode, int64_t pad_before,
                int64_t pad_after, int64_t* out, int64_t* pad_before_out, int64_t* pad_after_out) {
  const int64_t effective = (window - 1) * dilation + 1;
  if (mode == PaddingMode::Explicit) {
    *pad_before_out = pad_before;
    *pad_after_out = pad_after;
  } else {
    *pad_before_out = 0;
    *pad_after_out = 0;
  }
  if (in < 0) {
    *out = -1;
    return true;
  }
  switch (mode) {
    case PaddingMode::Valid:
      if (in < effective) return false;
      *out = (in - effective) / stride + 1;
      return true;
    case PaddingMode::Explicit: {
      const int64_t padded = in + pad_before + pad_after;
      if (padded < effective) return false;
      *out = (padded - effective) / stride + 1;
      return true;
    }
    case PaddingMode::Same: {
      *out = (in + stride - 1) / stride;
      const int64_t total = std::max<int64_t>((*out - 1) * stride + effective - in, 0);
      *pad_before_out = total / 2;
      *pad_after_out = total - total / 2;
      return *out >= 1;
    }
  }
  return false;
}

bool window_geometry(const WindowSpec& s, int64_t in_h, int64_t in_w, WindowGeometry* g) {
  return window_dim(in_h, s.window_h, s.stride_h, s.dilation_h, s.padding, s.pad_top, s.pad_bottom, &g->out_h,
                    &g->pad_top, &g->pad_bottom) &&
         window_dim(in_w, s.window_w, s.stride_w, s.dilation_w, s.padding, s.pad_left, s.pad_right, &g->out_w,
                    &g->pad_left, &g->pad_right);
}

}  // namespace weft
