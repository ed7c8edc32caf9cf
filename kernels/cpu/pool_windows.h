// The windows of a pooling node's output row, as the CPU's pooling kernels walk them
// (pooling.cpp, and pooling_small_channels.cpp's AVX-512 loops).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/pooling_window.h"

namespace weft::cpu {

// The input rows [h0, h1) that output row oh's windows cover.
struct Rows {
  int64_t h0, h1;
};
inline Rows rows_of(const PoolGeometry& g, int64_t oh) {
  const int64_t hs = oh * g.sh - g.pad_top;
  return {std::max<int64_t>(hs, 0), std::min(hs + g.kh, g.h)};
}

// The cells of one window inside the input: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};
inline Window window_of(const PoolGeometry& g, const Rows& rows, int64_t ow) {
  const int64_t ws = ow * g.sw - g.pad_left;
  return {rows.h0, rows.h1, std::max<int64_t>(ws, 0), std::min(ws + g.kw, g.w)};
}

}  // namespace weft::cpu
