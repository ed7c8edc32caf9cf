// depthwise_conv2d (DepthwiseConv2dNative) and its two gradient ops through the checks of
// conv_cases.h: against direct loops in float64 (multipliers 1 to 3, strides, dilations, SAME /
// VALID / explicit padding, odd sizes, 1x1 and whole-input windows), float32 (oneDNN's grouped
// convolution where it takes the problem) against them, float16 / bfloat16 against float32,
// gradients and gradients of gradients by finite differences, eager against traced, determinism,
// the errors, and a depthwise-separable block trained eagerly and traced.
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

const Family& family() {
  static const Family f{[](auto&&... a) { return depthwise_conv2d(a...); },
                        [](auto&&... a) { return depthwise_conv2d(a...); },
                        [](auto&&... a) { return depthwise_conv2d_backprop_input(a...); },
                        [](auto&&... a) { return depthwise_conv2d_backprop_filter(a...); },
                        "DepthwiseConv2dNative",
                        "DepthwiseConv2dNativeBackpropInput",
                        "DepthwiseConv2dNativeBackpropFilter"};
  return f;
}

TEST(DepthwiseConv2D, MatchesDirectLoopsInFloat64AndFloat32) { expect_matches_direct_loops(family(), cases()); }

// MobileNet-like layers, large enough for oneDNN's vectorised depthwise kernels, in chunks.
TEST(DepthwiseConv2D, Float32OfALargerLayerMatchesFloat64) {
  expect_float32_matches_float64(family(),
                                 {"larger", {9, 14, 13, 32}, {3, 3, 32, 1}, {1, 1}, {1, 1}, "SAME", {}, true});
  expect_float32_matches_float64(
      family(), {"larger strided, multiplier 2", {9, 14, 13, 24}, {3, 3, 24, 2}, {2, 2}, {1, 1}, "SAME", {}, true});
}

TEST(DepthwiseConv2D, GradientsByFiniteDifferences) { expect_gradients_by_finite_differences(family(), cases()); }

TEST(DepthwiseConv2D, SecondOrderThroughNestedTapes) {
  expect_second_order_through_nested_tapes(family(), cases()[1]);
}

TEST(DepthwiseConv2D, EagerEqualsTraced) {
  expect_eager_equals_traced(family(), {cases()[2], cases()[5], cases()[8]});
}

TEST(DepthwiseConv2D, HalfDtypesMatchFloat32) { expect_half_dtypes_match_float32(family(), cases()[1]); }

TEST(DepthwiseConv2D, SameBitsTwice) {
  expect_same_bits_twice(family(), {"repeat", {4, 10, 9, 16}, {3, 3, 16, 2}, {2, 1}, {1, 1}, "SAME", {}, true});
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
