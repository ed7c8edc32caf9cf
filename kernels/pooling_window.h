// The window of a pooling node, read from its attributes ("ksize", "strides" as {h, w},
// "padding" SAME/VALID), shared by the definitions (kernels/defs/pooling.cpp) and the kernels of
// every device (kernels/cpu/pooling.cpp, kernels/cuda/pooling.cu), so that they all accept the
// same attributes and agree on the geometry (kernels/window_geometry.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/window_geometry.h"
#include "runtime/attr.h"

namespace weft {

inline std::string pool_int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The window spec of `attrs`; on a bad attribute, false with `error` naming it (the caller
// prefixes the op's name through its fail()).
inline bool pool_window_spec(const Attrs& attrs, WindowSpec* spec, std::string* error) {
  const std::vector<int64_t>& ksize = attrs.get<std::vector<int64_t>>("ksize");
  const std::vector<int64_t>& strides = attrs.get<std::vector<int64_t>>("strides");
  const std::string& padding = attrs.get<std::string>("padding");
  if (ksize.size() != 2 || ksize[0] < 1 || ksize[1] < 1) {
    *error = "ksize must be two positive sizes {height, width}, got " + pool_int_list(ksize);
    return false;
  }
  if (strides.size() != 2 || strides[0] < 1 || strides[1] < 1) {
    *error = "strides must be two positive steps {height, width}, got " + pool_int_list(strides);
    return false;
  }
  PaddingMode mode;
  // EXPLICIT needs four paddings pooling has no attribute for; TensorFlow's pooling refuses it too.
  if (!parse_padding(padding, &mode) || mode == PaddingMode::Explicit) {
    *error = "padding must be \"SAME\" or \"VALID\", got \"" + padding + "\"";
    return false;
  }
  spec->window_h = ksize[0];
  spec->window_w = ksize[1];
  spec->stride_h = strides[0];
  spec->stride_w = strides[1];
  spec->padding = mode;
  return true;
}

// The geometry of a concrete NHWC input [n, h, w, c] (for kernels: the definition has already
// validated the node, so a failure here means a caller skipped it).
struct PoolGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pad_top = 0, pad_left = 0;
};

inline bool pool_geometry(const Attrs& attrs, const std::vector<int64_t>& nhwc, PoolGeometry* g, std::string* error) {
  WindowSpec spec;
  if (!pool_window_spec(attrs, &spec, error)) return false;
  WindowGeometry wg;
  if (nhwc.size() != 4 || !window_geometry(spec, nhwc[1], nhwc[2], &wg)) {
    *error = "ksize does not fit the input " + pool_int_list(nhwc);
    return false;
  }
  *g = {nhwc[0], nhwc[1], nhwc[2], nhwc[3], wg.out_h, wg.out_w, spec.window_h, spec.window_w,
        spec.stride_h, spec.stride_w, wg.pad_top, wg.pad_left};
  return true;
}

}  // namespace weft
