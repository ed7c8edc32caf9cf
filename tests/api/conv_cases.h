// What the convolution tests share (conv_test.cpp, depthwise_conv_test.cpp): a problem's shapes
// and window, its geometry worked out from TensorFlow's rules, the product terms of the direct
// loops, operands, and the checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft::conv_cases {

// One problem: shapes, window and the padding as the front-end takes it.
struct Case {
  std::string name;
  Shape x, w;  // [n, h, w, c], [kh, kw, c, f]
  std::vector<int64_t> strides{1, 1}, dilations{1, 1};
  std::string padding = "VALID";  // or "SAME", or "EXPLICIT" with `pads`
  ExplicitPadding pads{};
  bool depthwise = false;  // w is [kh, kw, c, multiplier]: the output has c * multiplier channels
};

// The padding actually applied and the output size, worked out here from TensorFlow's rules.
struct Geometry {
  int64_t oh, ow, top, left;
};

inline int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, const Case& c, int64_t before, int64_t after,
                       int64_t* pad_before) {
  const int64_t eff = (k - 1) * d + 1;
  if (c.padding == "VALID") {
    *pad_before = 0;
    return (in - eff) / s + 1;
  }
  if (c.padding == "SAME") {
    const int64_t out = (in + s - 1) / s;
    *pad_before = std::max<int64_t>((out - 1) * s + eff - in, 0) / 2;
    return out;
  }
  *pad_before = before;
  return (in + before + after - eff) / s + 1;
}

inline Geometry geometry(const Case& c) {
  Geometry g{};
  g.oh = out_dim(c.x[1], c.w[0], c.strides[0], c.dilations[0], c, c.pads.top, c.pads.bottom, &g.top);
  g.ow = out_dim(c.x[2], c.w[1], c.strides[1], c.dilations[1], c, c.pads.left, c.pads.right, &g.left);
  return g;
}

// Calls f(n, oy, ox, ky, kx, iy, ix) for every product term of the convolution.
inline void for_each_term(const Case& c,
                          const std::function<void(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                   int64_t)>& f) {
  const Geometry g = geometry(c);
  for (int64_t n = 0; n < c.x[0]; ++n)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        for (int64_t ky = 0; ky < c.w[0]; ++ky)
          for (int64_t kx = 0; kx < c.w[1]; ++kx) {
            const int64_t iy = oy * c.strides[0] - g.top + ky * c.dilations[0];
            const int64_t ix = ox * c.strides[1] - g.left + kx * c.dilations[1];
            if (iy >= 0 && iy < c.x[1] && ix >= 0 && ix < c.x[2]) f(n, oy, ox, ky, kx, iy, ix);
          }
}

inline Shape y_shape(const Case& c) {
  const Geometry g = geometry(c);
  return {c.x[0], g.oh, g.ow, c.depthwise ? c.w[2] * c.w[3] : c.w[3]};
}

inline void expect_near(const std::vector<double>& want, const Tensor& got_t, double tol, const std::string& what) {
  const std::vector<double> got = cast(got_t, float64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

struct Operands {
  Tensor x, w, dy;
};

inline Operands operands(const Case& c, DType dtype, int64_t seed) {
  // Drawn in float64 and cast, so every dtype sees the same values (rounded).
  return {cast(random::uniform(c.x, -1, 1, seed, float64), dtype),
          cast(random::uniform(c.w, -1, 1, seed + 1, float64), dtype),
          cast(random::uniform(y_shape(c), -1, 1, seed + 2, float64), dtype)};
}

inline void expect_invalid(const std::function<void()>& f, const std::vector<std::string>& parts,
                           const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const InvalidArgument& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << what << ": \"" << e.what() << "\" lacks " << p;
  }
}

}  // namespace weft::conv_cases
