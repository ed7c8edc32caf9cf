// Conv2D and its two gradient ops through the checks of conv_cases.h: against direct loops in
// float64 (strides, dilations, SAME / VALID / explicit padding, odd sizes, 1x1 and whole-input
// windows), float32 (oneDNN where it takes the problem) against them, float16 / bfloat16 against
// float32, gradients and gradients of gradients by finite differences, eager against traced, the
// errors, and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "conv_cases.h"
#include "eager_vs_traced.h"
#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using namespace conv_cases;

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"valid 3x3", {2, 5, 6, 3}, {3, 3, 3, 4}},
      {"same 3x3", {2, 5, 6, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "SAME"},
      {"same stride 2 odd padding", {1, 7, 6, 2}, {2, 3, 2, 3}, {2, 2}, {1, 1}, "SAME"},
      {"valid strides 2,1", {2, 6, 5, 2}, {3, 2, 2, 2}, {2, 1}, {1, 1}, "VALID"},
      {"same dilated 2", {1, 7, 7, 2}, {3, 3, 2, 2}, {1, 1}, {2, 2}, "SAME"},
      {"explicit dilated strided", {1, 6, 7, 2}, {2, 3, 2, 3}, {1, 2}, {2, 1}, "EXPLICIT", {1, 0, 2, 1}},
      {"explicit uneven stride 2", {2, 5, 5, 1}, {3, 3, 1, 2}, {2, 2}, {1, 1}, "EXPLICIT", {0, 2, 1, 1}},
      {"1x1 stride 2", {2, 5, 4, 3}, {1, 1, 3, 5}, {2, 2}, {1, 1}, "VALID"},
      {"window as large as input", {2, 4, 3, 2}, {4, 3, 2, 3}},
      {"odd sizes same stride 3", {1, 3, 5, 1}, {2, 3, 1, 2}, {3, 3}, {1, 1}, "SAME"},
  };
  return all;
}

const Family& family() {
  static const Family f{[](auto&&... a) { return conv2d(a...); },
                        [](auto&&... a) { return conv2d(a...); },
                        [](auto&&... a) { return conv2d_backprop_input(a...); },
                        [](auto&&... a) { return conv2d_backprop_filter(a...); },
                        "Conv2D",
                        "Conv2DBackpropInput",
                        "Conv2DBackpropFilter"};
  return f;
}

TEST(Conv2D, MatchesDirectLoopsInFloat64AndFloat32) { expect_matches_direct_loops(family(), cases()); }

TEST(Conv2D, Float32OfALargerLayerMatchesFloat64) {
  expect_float32_matches_float64(family(), {"larger", {2, 12, 11, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "SAME"});
}

TEST(Conv2D, GradientsByFiniteDifferences) { expect_gradients_by_finite_differences(family(), cases()); }

TEST(Conv2D, SecondOrderThroughNestedTapes) { expect_second_order_through_nested_tapes(family(), cases()[1]); }

TEST(Conv2D, EagerEqualsTraced) { expect_eager_equals_traced(family(), {cases()[2], cases()[5], cases()[8]}); }

TEST(Conv2D, HalfDtypesMatchFloat32) { expect_half_dtypes_match_float32(family(), cases()[1]); }

TEST(Conv2D, SameBitsTwice) {
  expect_same_bits_twice(family(), {"repeat", {2, 10, 9, 8}, {3, 3, 8, 16}, {2, 1}, {1, 1}, "SAME"});
}

TEST(Conv2D, BadInputsAreInvalidArguments) {
  const Tensor x = zeros({1, 5, 5, 3}), w = zeros({3, 3, 3, 2});
  expect_invalid([&] { conv2d(zeros({5, 5, 3}), w); }, {"[conv2d]", "rank 4", "(5, 5, 3)"}, "rank");
  expect_invalid([&] { conv2d(x, zeros({3, 3, 4, 2})); }, {"[conv2d]", "channels", "(1, 5, 5, 3)", "(3, 3, 4, 2)"},
                 "channels");
  expect_invalid([&] { conv2d(zeros({1, 2, 2, 3}), w); }, {"[conv2d]", "larger", "VALID", "(1, 2, 2, 3)"}, "window");
  expect_invalid([&] { conv2d(x, w, {1, 1}, "FULL"); }, {"[conv2d]", "padding", "FULL"}, "padding");
  expect_invalid([&] { conv2d(x, w, {0, 1}); }, {"[conv2d]", "strides", "{0, 1}"}, "stride");
  expect_invalid([&] { conv2d(x, w, {1}); }, {"[conv2d]", "strides"}, "one stride");
  expect_invalid([&] { conv2d(x, w, {1, 1}, "SAME", {1, -1}); }, {"[conv2d]", "dilations", "{1, -1}"}, "dilation");
  expect_invalid([&] { conv2d(x, w, {1, 1}, ExplicitPadding{1, -1, 0, 0}); }, {"[conv2d]", "explicit_paddings"},
                 "explicit");
  expect_invalid([&] { conv2d(zeros({1, 5, 5, 3}, int32), zeros({3, 3, 3, 2}, int32)); }, {"[conv2d]", "int32"},
                 "dtype");
  expect_invalid([&] { conv2d(x, zeros({3, 3, 3, 2}, float64)); }, {"[conv2d]", "float64"}, "mixed dtypes");
  expect_invalid([&] { conv2d_backprop_input({1, 5, 5, 3}, w, zeros({1, 4, 3, 2}), {1, 1}, "VALID"); },
                 {"[conv2d_backprop_input]", "dy", "(1, 4, 3, 2)"}, "dy shape");
  expect_invalid([&] { conv2d_backprop_input({1, 5, 5}, w, zeros({1, 3, 3, 2}), {1, 1}, "VALID"); },
                 {"[conv2d_backprop_input]", "input_sizes"}, "input_sizes");
  expect_invalid([&] { conv2d_backprop_filter(x, {3, 3, 3}, zeros({1, 3, 3, 2}), {1, 1}, "VALID"); },
                 {"[conv2d_backprop_filter]", "filter_sizes"}, "filter_sizes");
}

TEST(Conv2D, UnknownBatchInInputSizesComesFromDy) {
  const Tensor w = random::uniform({3, 3, 2, 4}, -1, 1, 5, float64), dy = random::uniform({3, 4, 4, 4}, -1, 1, 6, float64);
  Tensor a = conv2d_backprop_input({-1, 6, 6, 2}, w, dy, {1, 1}, "VALID");
  Tensor b = conv2d_backprop_input({3, 6, 6, 2}, w, dy, {1, 1}, "VALID");
  EXPECT_EQ(a.shape(), (Shape{3, 6, 6, 2}));
  eager_vs_traced::expect_same_bits(b, a, "batch from dy");
}

}  // namespace
}  // namespace weft
