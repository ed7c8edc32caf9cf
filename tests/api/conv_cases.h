// What the convolution tests share (conv_test.cpp, depthwise_conv_test.cpp): a problem's shapes
// and window, its geometry worked out from TensorFlow's rules, the direct loops in float64, the
// operands, and the checks every family of convolution ops (an op and its two gradient ops) must
// pass: against the loops in float64 and float32, gradients and gradients of gradients by finite
// differences, eager against traced, 16-bit dtypes against float32, determinism.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "eager_vs_traced.h"
#include "gradient_check.h"
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

// A family's front-ends (as api/ops/conv.h spells them) and its ops' node types.
struct Family {
  std::function<Tensor(const Tensor&, const Tensor&, std::vector<int64_t>, const std::string&, std::vector<int64_t>)>
      forward;
  std::function<Tensor(const Tensor&, const Tensor&, std::vector<int64_t>, const ExplicitPadding&,
                       std::vector<int64_t>)>
      forward_explicit;
  std::function<Tensor(const std::vector<int64_t>&, const Tensor&, const Tensor&, std::vector<int64_t>,
                       const std::string&, std::vector<int64_t>)>
      input_gradient;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, const Tensor&, std::vector<int64_t>,
                       const std::string&, std::vector<int64_t>)>
      filter_gradient;
  std::string forward_op, input_op, filter_op;
};

inline Tensor conv(const Family& f, const Case& c, const Tensor& x, const Tensor& w) {
  if (c.padding == "EXPLICIT") return f.forward_explicit(x, w, c.strides, c.pads, c.dilations);
  return f.forward(x, w, c.strides, c.padding, c.dilations);
}

// The backprop ops take a padding string only; an explicit case goes through the gradient of the
// forward op instead (which passes the node's explicit paddings on), so both are covered.
inline Tensor backprop_input(const Family& f, const Case& c, const Tensor& w, const Tensor& dy) {
  if (c.padding != "EXPLICIT") return f.input_gradient(c.x.to_vector(), w, dy, c.strides, c.padding, c.dilations);
  Tensor x = zeros(c.x, w.dtype());
  GradientTape tape;
  tape.watch(x);
  Tensor y = conv(f, c, x, w);
  return tape.gradient(reduce_sum(mul(y, dy)), x);
}

inline Tensor backprop_filter(const Family& f, const Case& c, const Tensor& x, const Tensor& dy) {
  if (c.padding != "EXPLICIT") return f.filter_gradient(x, c.w.to_vector(), dy, c.strides, c.padding, c.dilations);
  Tensor w = zeros(c.w, x.dtype());
  GradientTape tape;
  tape.watch(w);
  Tensor y = conv(f, c, x, w);
  return tape.gradient(reduce_sum(mul(y, dy)), w);
}

struct Refs {
  std::vector<double> y, dx, dw;
};

// All three ops by direct loops: y = x (*) w, dx from (w, dy), dw from (x, dy). Filter column
// (ch, j) of w [kh, kw, C, w3] meets input channel ch; it gives output channel j (Conv2D: sums
// over ch), or ch * w3 + j (depthwise).
inline Refs direct(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                   const std::vector<double>& dy) {
  const int64_t H = c.x[1], W = c.x[2], C = c.x[3], KW = c.w[1], W3 = c.w[3];
  const Shape ys = y_shape(c);
  Refs r{std::vector<double>(static_cast<size_t>(ys.num_elements())),
         std::vector<double>(static_cast<size_t>(c.x.num_elements())),
         std::vector<double>(static_cast<size_t>(c.w.num_elements()))};
  for_each_term(c, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t j = 0; j < W3; ++j) {
        const size_t xi = static_cast<size_t>(((n * H + iy) * W + ix) * C + ch);
        const size_t wi = static_cast<size_t>(((ky * KW + kx) * C + ch) * W3 + j);
        const int64_t out_channel = c.depthwise ? ch * W3 + j : j;
        const size_t yi = static_cast<size_t>(((n * ys[1] + oy) * ys[2] + ox) * ys[3] + out_channel);
        r.y[yi] += x[xi] * w[wi];
        r.dx[xi] += dy[yi] * w[wi];
        r.dw[wi] += x[xi] * dy[yi];
      }
  });
  return r;
}

// float64 (weft's reference) and float32 (oneDNN where it has a real implementation) against
// the direct loops.
inline void expect_matches_direct_loops(const Family& f, const std::vector<Case>& cases) {
  int64_t seed = 10;
  for (const Case& c : cases) {
    const Operands o = operands(c, float64, seed += 3);
    const Refs r = direct(c, o.x.to_vector<double>(), o.w.to_vector<double>(), o.dy.to_vector<double>());
    ASSERT_EQ(conv(f, c, o.x, o.w).shape(), y_shape(c)) << c.name;
    expect_near(r.y, conv(f, c, o.x, o.w), 1e-12, c.name + ": " + f.forward_op + " float64");
    expect_near(r.dx, backprop_input(f, c, o.w, o.dy), 1e-12, c.name + ": backprop input float64");
    expect_near(r.dw, backprop_filter(f, c, o.x, o.dy), 1e-12, c.name + ": backprop filter float64");
    const Operands h{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
    expect_near(r.y, conv(f, c, h.x, h.w), 1e-5, c.name + ": " + f.forward_op + " float32");
    expect_near(r.dx, backprop_input(f, c, h.w, h.dy), 1e-5, c.name + ": backprop input float32");
    expect_near(r.dw, backprop_filter(f, c, h.x, h.dy), 1e-5, c.name + ": backprop filter float32");
  }
}

// A layer large enough for oneDNN's vectorised kernels (and weft's threaded loops), float32
// against float64.
inline void expect_float32_matches_float64(const Family& f, const Case& c) {
  const Operands o = operands(c, float64, 3);
  const Operands h{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
  expect_near(conv(f, c, o.x, o.w).to_vector<double>(), conv(f, c, h.x, h.w), 1e-4, c.name + ": forward");
  expect_near(backprop_input(f, c, o.w, o.dy).to_vector<double>(), backprop_input(f, c, h.w, h.dy), 1e-4,
              c.name + ": input");
  expect_near(backprop_filter(f, c, o.x, o.dy).to_vector<double>(), backprop_filter(f, c, h.x, h.dy), 1e-4,
              c.name + ": filter");
}

// The op's gradient, and the gradient's gradient: both backprop ops are differentiable in both
// inputs.
inline void expect_gradients_by_finite_differences(const Family& f, const std::vector<Case>& cases) {
  using testing::expect_gradients_match;
  int64_t seed = 100;
  for (const Case& c : cases) {
    if (c.x.num_elements() > 100) continue;  // each element costs two evaluations; keep it quick
    const Operands o = operands(c, float64, seed += 3);
    expect_gradients_match([&](const std::vector<Tensor>& in) { return conv(f, c, in[0], in[1]); }, {o.x, o.w}, 1e-6,
                           1e-6, c.name + ": " + f.forward_op);
    if (c.padding == "EXPLICIT") continue;  // the backprop front-ends take a padding string
    expect_gradients_match([&](const std::vector<Tensor>& in) { return backprop_input(f, c, in[0], in[1]); },
                           {o.w, o.dy}, 1e-6, 1e-6, c.name + ": " + f.input_op);
    expect_gradients_match([&](const std::vector<Tensor>& in) { return backprop_filter(f, c, in[0], in[1]); },
                           {o.x, o.dy}, 1e-6, 1e-6, c.name + ": " + f.filter_op);
  }
}

// d/dx of sum(d/dw sum(conv(x, w)^2)): differentiates the filter gradient op, checked against
// finite differences of the inner gradient.
inline void expect_second_order_through_nested_tapes(const Family& f, const Case& c) {
  const Operands o = operands(c, float64, 7);
  testing::expect_gradients_match(
      [&](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[1]);
        Tensor y = conv(f, c, in[0], in[1]);
        return inner.gradient(reduce_sum(mul(y, y)), in[1]);
      },
      {o.x, o.w}, 1e-6, 1e-5, "second order");
}

inline void expect_eager_equals_traced(const Family& f, const std::vector<Case>& cases) {
  using eager_vs_traced::expect_traced_equals_eager;
  for (const Case& c : cases) {
    for (DType d : {float32, float64}) {
      const Operands o = operands(c, d, 40);
      const std::string what = c.name + " " + std::string(dtype_name(d));
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return conv(f, c, in[0], in[1]); }, {o.x, o.w},
                                 f.forward_op, what + ": forward");
      if (c.padding == "EXPLICIT") continue;
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return backprop_input(f, c, in[0], in[1]); },
                                 {o.w, o.dy}, f.input_op, what + ": backprop input");
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return backprop_filter(f, c, in[0], in[1]); },
                                 {o.x, o.dy}, f.filter_op, what + ": backprop filter");
    }
  }
}

// 16-bit dtypes compute through float32 and round once: the float32 result on the same (rounded)
// inputs, rounded, within one 16-bit rounding.
inline void expect_half_dtypes_match_float32(const Family& f, const Case& c) {
  for (DType d : {float16, bfloat16}) {
    const Operands o = operands(c, d, 60);
    const Operands h{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
    const double tol = d == float16 ? 2e-3 : 1.6e-2;
    const std::string what(dtype_name(d));
    Tensor y = conv(f, c, o.x, o.w);
    ASSERT_EQ(y.dtype(), d);
    expect_near(cast(conv(f, c, h.x, h.w), float64).to_vector<double>(), y, tol, what + ": forward");
    expect_near(cast(backprop_input(f, c, h.w, h.dy), float64).to_vector<double>(), backprop_input(f, c, o.w, o.dy),
                tol, what + ": backprop input");
    expect_near(cast(backprop_filter(f, c, h.x, h.dy), float64).to_vector<double>(), backprop_filter(f, c, o.x, o.dy),
                tol, what + ": backprop filter");
  }
}

// oneDNN (float32) and the reference (float64) alike: bits depend on the problem and the thread
// count only, which are the same here (oneDNN's on the shape alone: conv_onednn_test.cpp).
inline void expect_same_bits_twice(const Family& f, const Case& c) {
  for (DType d : {float32, float64}) {
    const Operands o = operands(c, d, 80);
    eager_vs_traced::expect_same_bits(conv(f, c, o.x, o.w), conv(f, c, o.x, o.w), "forward");
    eager_vs_traced::expect_same_bits(backprop_input(f, c, o.w, o.dy), backprop_input(f, c, o.w, o.dy), "input");
    eager_vs_traced::expect_same_bits(backprop_filter(f, c, o.x, o.dy), backprop_filter(f, c, o.x, o.dy), "filter");
  }
}

}  // namespace weft::conv_cases
