// depthwise_conv2d (DepthwiseConv2dNative) and its two gradient ops: against direct loops written
// here in float64 (multipliers 1 to 3, strides, dilations, SAME / VALID / explicit padding, odd
// sizes, 1x1 and whole-input windows), float32 (oneDNN's grouped convolution where it takes the
// problem) against them, float16 / bfloat16 against float32, gradients and gradients of gradients
// by finite differences, eager against traced, determinism and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conv_cases.h"
#include "eager_vs_traced.h"
#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using namespace conv_cases;

// Filters are [kh, kw, C, M].
const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> v = {
        {"valid 3x3 multiplier 1", {2, 5, 6, 3}, {3, 3, 3, 1}},
        {"same 3x3 multiplier 2", {2, 5, 6, 3}, {3, 3, 3, 2}, {1, 1}, {1, 1}, "SAME"},
        {"same stride 2 odd padding", {1, 7, 6, 2}, {2, 3, 2, 3}, {2, 2}, {1, 1}, "SAME"},
        {"valid strides 2,1", {2, 6, 5, 4}, {3, 2, 4, 1}, {2, 1}, {1, 1}, "VALID"},
        {"same dilated 2", {1, 7, 7, 2}, {3, 3, 2, 2}, {1, 1}, {2, 2}, "SAME"},
        {"explicit dilated strided", {1, 6, 7, 2}, {2, 3, 2, 3}, {1, 2}, {2, 1}, "EXPLICIT", {1, 0, 2, 1}},
        {"explicit uneven stride 2", {2, 5, 5, 1}, {3, 3, 1, 2}, {2, 2}, {1, 1}, "EXPLICIT", {0, 2, 1, 1}},
        {"1x1 stride 2", {2, 5, 4, 3}, {1, 1, 3, 2}, {2, 2}, {1, 1}, "VALID"},
        {"window as large as input", {2, 4, 3, 2}, {4, 3, 2, 3}},
        {"odd sizes same stride 3", {1, 3, 5, 5}, {2, 3, 5, 1}, {3, 3}, {1, 1}, "SAME"},
    };
    for (Case& c : v) c.depthwise = true;
    return v;
  }();
  return all;
}

struct Refs {
  std::vector<double> y, dx, dw;
};

// All three ops by direct loops: channel ch * M + m of y is input channel ch under filter
// column (ch, m).
Refs direct(const Case& c, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& dy) {
  const int64_t H = c.x[1], W = c.x[2], C = c.x[3], KW = c.w[1], M = c.w[3];
  const Shape ys = y_shape(c);
  Refs r{std::vector<double>(static_cast<size_t>(ys.num_elements())),
         std::vector<double>(static_cast<size_t>(c.x.num_elements())),
         std::vector<double>(static_cast<size_t>(c.w.num_elements()))};
  for_each_term(c, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t m = 0; m < M; ++m) {
        const size_t xi = static_cast<size_t>(((n * H + iy) * W + ix) * C + ch);
        const size_t wi = static_cast<size_t>(((ky * KW + kx) * C + ch) * M + m);
        const size_t yi = static_cast<size_t>(((n * ys[1] + oy) * ys[2] + ox) * C * M + ch * M + m);
        r.y[yi] += x[xi] * w[wi];
        r.dx[xi] += dy[yi] * w[wi];
        r.dw[wi] += x[xi] * dy[yi];
      }
  });
  return r;
}

Tensor conv(const Case& c, const Tensor& x, const Tensor& w) {
  if (c.padding == "EXPLICIT") return depthwise_conv2d(x, w, c.strides, c.pads, c.dilations);
  return depthwise_conv2d(x, w, c.strides, c.padding, c.dilations);
}

// The backprop ops take a padding string only; an explicit case goes through the gradient of
// depthwise_conv2d instead (which passes the node's explicit paddings on), so both are covered.
Tensor backprop_input(const Case& c, const Tensor& w, const Tensor& dy) {
  if (c.padding != "EXPLICIT")
    return depthwise_conv2d_backprop_input(c.x.to_vector(), w, dy, c.strides, c.padding, c.dilations);
  Tensor x = zeros(c.x, w.dtype());
  GradientTape tape;
  tape.watch(x);
  Tensor y = conv(c, x, w);
  return tape.gradient(reduce_sum(mul(y, dy)), x);
}

Tensor backprop_filter(const Case& c, const Tensor& x, const Tensor& dy) {
  if (c.padding != "EXPLICIT")
    return depthwise_conv2d_backprop_filter(x, c.w.to_vector(), dy, c.strides, c.padding, c.dilations);
  Tensor w = zeros(c.w, x.dtype());
  GradientTape tape;
  tape.watch(w);
  Tensor y = conv(c, x, w);
  return tape.gradient(reduce_sum(mul(y, dy)), w);
}

TEST(DepthwiseConv2D, MatchesDirectLoopsInFloat64AndFloat32) {
  int64_t seed = 10;
  for (const Case& c : cases()) {
    const Operands o = operands(c, float64, seed += 3);
    const Refs r = direct(c, o.x.to_vector<double>(), o.w.to_vector<double>(), o.dy.to_vector<double>());
    ASSERT_EQ(conv(c, o.x, o.w).shape(), y_shape(c)) << c.name;
    expect_near(r.y, conv(c, o.x, o.w), 1e-12, c.name + ": depthwise float64");
    expect_near(r.dx, backprop_input(c, o.w, o.dy), 1e-12, c.name + ": backprop input float64");
    expect_near(r.dw, backprop_filter(c, o.x, o.dy), 1e-12, c.name + ": backprop filter float64");
    const Operands f{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
    expect_near(r.y, conv(c, f.x, f.w), 1e-5, c.name + ": depthwise float32");
    expect_near(r.dx, backprop_input(c, f.w, f.dy), 1e-5, c.name + ": backprop input float32");
    expect_near(r.dw, backprop_filter(c, f.x, f.dy), 1e-5, c.name + ": backprop filter float32");
  }
}

// A MobileNet-like layer, large enough for oneDNN's vectorised depthwise kernels, in chunks.
TEST(DepthwiseConv2D, Float32OfALargerLayerMatchesFloat64) {
  for (const Case& c : {Case{"larger", {9, 14, 13, 32}, {3, 3, 32, 1}, {1, 1}, {1, 1}, "SAME", {}, true},
                        Case{"larger strided, multiplier 2", {9, 14, 13, 24}, {3, 3, 24, 2}, {2, 2}, {1, 1}, "SAME",
                             {}, true}}) {
    const Operands o = operands(c, float64, 3);
    const Operands f{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
    expect_near(conv(c, o.x, o.w).to_vector<double>(), conv(c, f.x, f.w), 1e-4, c.name + ": depthwise");
    expect_near(backprop_input(c, o.w, o.dy).to_vector<double>(), backprop_input(c, f.w, f.dy), 1e-4,
                c.name + ": input");
    expect_near(backprop_filter(c, o.x, o.dy).to_vector<double>(), backprop_filter(c, f.x, f.dy), 1e-4,
                c.name + ": filter");
  }
}

TEST(DepthwiseConv2D, GradientsByFiniteDifferences) {
  using testing::expect_gradients_match;
  int64_t seed = 100;
  for (const Case& c : cases()) {
    if (c.x.num_elements() > 100) continue;  // each element costs two evaluations; keep it quick
    const Operands o = operands(c, float64, seed += 3);
    expect_gradients_match([&](const std::vector<Tensor>& in) { return conv(c, in[0], in[1]); }, {o.x, o.w}, 1e-6,
                           1e-6, c.name + ": depthwise_conv2d");
    if (c.padding == "EXPLICIT") continue;  // the backprop front-ends take a padding string
    // The gradient's gradient: both backprop ops are differentiable in both inputs.
    expect_gradients_match([&](const std::vector<Tensor>& in) { return backprop_input(c, in[0], in[1]); },
                           {o.w, o.dy}, 1e-6, 1e-6, c.name + ": depthwise_conv2d_backprop_input");
    expect_gradients_match([&](const std::vector<Tensor>& in) { return backprop_filter(c, in[0], in[1]); },
                           {o.x, o.dy}, 1e-6, 1e-6, c.name + ": depthwise_conv2d_backprop_filter");
  }
}

TEST(DepthwiseConv2D, SecondOrderThroughNestedTapes) {
  const Case& c = cases()[1];
  const Operands o = operands(c, float64, 7);
  testing::expect_gradients_match(
      [&](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[1]);
        Tensor y = conv(c, in[0], in[1]);
        return inner.gradient(reduce_sum(mul(y, y)), in[1]);
      },
      {o.x, o.w}, 1e-6, 1e-5, "second order");
}

TEST(DepthwiseConv2D, EagerEqualsTraced) {
  using eager_vs_traced::expect_traced_equals_eager;
  for (const Case& c : {cases()[2], cases()[5], cases()[8]}) {
    for (DType d : {float32, float64}) {
      const Operands o = operands(c, d, 40);
      const std::string what = c.name + " " + std::string(dtype_name(d));
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return conv(c, in[0], in[1]); }, {o.x, o.w},
                                 "DepthwiseConv2dNative", what + ": depthwise");
      if (c.padding == "EXPLICIT") continue;
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return backprop_input(c, in[0], in[1]); },
                                 {o.w, o.dy}, "DepthwiseConv2dNativeBackpropInput", what + ": backprop input");
      expect_traced_equals_eager([&](const std::vector<Tensor>& in) { return backprop_filter(c, in[0], in[1]); },
                                 {o.x, o.dy}, "DepthwiseConv2dNativeBackpropFilter", what + ": backprop filter");
    }
  }
}

// 16-bit dtypes compute through float32 and round once.
TEST(DepthwiseConv2D, HalfDtypesMatchFloat32) {
  const Case& c = cases()[1];
  for (DType d : {float16, bfloat16}) {
    const Operands o = operands(c, d, 60);
    const Operands f{cast(o.x, float32), cast(o.w, float32), cast(o.dy, float32)};
    const double tol = d == float16 ? 2e-3 : 1.6e-2;
    const std::string what(dtype_name(d));
    Tensor y = conv(c, o.x, o.w);
    ASSERT_EQ(y.dtype(), d);
    expect_near(cast(conv(c, f.x, f.w), float64).to_vector<double>(), y, tol, what + ": depthwise");
    expect_near(cast(backprop_input(c, f.w, f.dy), float64).to_vector<double>(), backprop_input(c, o.w, o.dy), tol,
                what + ": backprop input");
    expect_near(cast(backprop_filter(c, f.x, f.dy), float64).to_vector<double>(), backprop_filter(c, o.x, o.dy), tol,
                what + ": backprop filter");
  }
}

TEST(DepthwiseConv2D, SameBitsTwice) {
  const Case c{"repeat", {4, 10, 9, 16}, {3, 3, 16, 2}, {2, 1}, {1, 1}, "SAME", {}, true};
  for (DType d : {float32, float64}) {
    const Operands o = operands(c, d, 80);
    eager_vs_traced::expect_same_bits(conv(c, o.x, o.w), conv(c, o.x, o.w), "depthwise");
    eager_vs_traced::expect_same_bits(backprop_input(c, o.w, o.dy), backprop_input(c, o.w, o.dy), "input");
    eager_vs_traced::expect_same_bits(backprop_filter(c, o.x, o.dy), backprop_filter(c, o.x, o.dy), "filter");
  }
}

TEST(DepthwiseConv2D, BadInputsAreInvalidArguments) {
  const Tensor x = zeros({1, 5, 5, 3}), w = zeros({3, 3, 3, 2});
  expect_invalid([&] { depthwise_conv2d(zeros({5, 5, 3}), w); }, {"[depthwise_conv2d]", "rank 4", "(5, 5, 3)"},
                 "rank");
  expect_invalid([&] { depthwise_conv2d(x, zeros({3, 3, 4, 2})); },
                 {"[depthwise_conv2d]", "channels", "(1, 5, 5, 3)", "(3, 3, 4, 2)"}, "channels");
  expect_invalid([&] { depthwise_conv2d(zeros({1, 2, 2, 3}), w); },
                 {"[depthwise_conv2d]", "larger", "VALID", "(1, 2, 2, 3)"}, "window");
  expect_invalid([&] { depthwise_conv2d(x, w, {1, 1}, "FULL"); }, {"[depthwise_conv2d]", "padding", "FULL"},
                 "padding");
  expect_invalid([&] { depthwise_conv2d(x, w, {0, 1}); }, {"[depthwise_conv2d]", "strides", "{0, 1}"}, "stride");
  expect_invalid([&] { depthwise_conv2d(x, w, {-2, 1}); }, {"[depthwise_conv2d]", "strides", "{-2, 1}"},
                 "negative stride");
  expect_invalid([&] { depthwise_conv2d(x, zeros({3, 3, 3, 2}, float64)); }, {"[depthwise_conv2d]", "float64"},
                 "mixed dtypes");
  // dy must have C * M channels: 3 * 2 = 6 here, not 2.
  expect_invalid([&] { depthwise_conv2d_backprop_input({1, 5, 5, 3}, w, zeros({1, 3, 3, 2}), {1, 1}, "VALID"); },
                 {"[depthwise_conv2d_backprop_input]", "dy", "(1, 3, 3, 2)", "[1, 3, 3, 6]"}, "dy channels");
  expect_invalid([&] { depthwise_conv2d_backprop_filter(x, {3, 3, 3}, zeros({1, 3, 3, 6}), {1, 1}, "VALID"); },
                 {"[depthwise_conv2d_backprop_filter]", "filter_sizes"}, "filter_sizes");
}

// The layer a MobileNet block is made of: depthwise then pointwise, trained a step eagerly and
// traced with the same result.
TEST(DepthwiseConv2D, DepthwiseSeparableBlockTrainsTheSameEagerAndTraced) {
  const Tensor x = random::normal({4, 8, 8, 6}, 0, 1, 3);
  const Tensor dw0 = random::normal({3, 3, 6, 1}, 0, 0.3, 4), pw0 = random::normal({1, 1, 6, 8}, 0, 0.3, 5);
  auto loss_and_grads = [](const Tensor& in, const Tensor& dw, const Tensor& pw) {
    GradientTape tape;
    tape.watch(dw);
    tape.watch(pw);
    const Tensor h = relu(depthwise_conv2d(in, dw, {1, 1}, "SAME"));
    const Tensor loss = reduce_mean(square(conv2d(h, pw)));
    std::vector<Tensor> out = tape.gradient(loss, {dw, pw});
    out.insert(out.begin(), loss);
    return out;
  };
  const std::vector<Tensor> eager = loss_and_grads(x, dw0, pw0);
  auto traced = function([&](Tensor in, Tensor dw, Tensor pw) { return loss_and_grads(in, dw, pw); });
  const std::vector<Tensor> graph = traced(x, dw0, pw0);
  ASSERT_EQ(graph.size(), 3u);
  for (size_t i = 0; i < 3; ++i) eager_vs_traced::expect_same_bits(eager[i], graph[i], "output " + std::to_string(i));
  EXPECT_EQ(eager[1].shape(), dw0.shape());
  EXPECT_GT(eager[0].item<float>(), 0.f);
}

}  // namespace
}  // namespace weft
