// The geometry of a sliding window over NHWC images, shared by convolution and pooling, their
// gradients, their definitions (shape inference) and their kernels on every device, so that SAME
// means one thing everywhere.
//
//   WindowGeometry g = window_geometry(attrs_of_the_node, in_h, in_w, window_h, window_w);
//   // g.out_h, g.out_w, g.pad_top, g.pad_left (pad_bottom / pad_right follow)
//
// TensorFlow's arithmetic: VALID has no padding, out = ceil((in - effective_window + 1) / stride);
// SAME has out = ceil(in / stride) and pads max((out - 1) * stride + effective_window - in, 0) in
// all, the odd one at the bottom / right; EXPLICIT takes the four paddings as given. The
// effective window of a dilated filter is (k - 1) * dilation + 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

enum class PaddingMode { Valid, Same, Explicit };

struct WindowSpec {
  int64_t window_h = 1, window_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  PaddingMode padding = PaddingMode::Valid;
  // EXPLICIT only: rows and columns added at the top, bottom, left and right.
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

struct WindowGeometry {
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// "SAME" / "same" -> Same, "VALID" / "valid" -> Valid, "EXPLICIT" -> Explicit; false otherwise.
bool parse_padding(const std::string& text, PaddingMode* mode);
const char* padding_name(PaddingMode mode);

// One spatial dimension: in -> out and the padding before and after. `in` may be -1 (unknown
// while tracing): out is then -1 too. Returns false when the (effective) window does not fit a
// VALID or explicitly padded input (out would be < 1).
bool window_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation, PaddingMode mode, int64_t pad_before,
                int64_t pad_after, int64_t* out, int64_t* pad_before_out, int64_t* pad_after_out);

// Both dimensions; false when either does not fit (see window_dim).
bool window_geometry(const WindowSpec& spec, int64_t in_h, int64_t in_w, WindowGeometry* g);

}  // namespace weft
