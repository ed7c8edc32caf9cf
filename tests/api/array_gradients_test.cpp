// Gradients of the array ops (and of broadcast_to, unsorted_segment_sum and pad) against central
// finite differences in float64, with odd shapes, negative axes, repeated gather indices and
// gathers along inner axes; plus the ops the tape must never record.
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;
using Fn = testing::Fn;

Tensor f64(const Shape& s, int64_t seed) { return random::uniform(s, -1, 1, seed, float64); }

// Every array op is linear, so central differences are exact up to rounding.
void check(const Fn& f, std::vector<Tensor> inputs, const std::string& what) {
  expect_gradients_match(f, std::move(inputs), 1e-6, 1e-7, what);
}

TEST(ArrayGradients, Reshape) {
  check([](auto& x) { return reshape(x[0], {5, 3}); }, {f64({3, 5}, 1)}, "reshape");
  check([](auto& x) { return reshape(x[0], {-1}); }, {f64({2, 3, 7}, 2)}, "reshape to -1");
  check([](auto& x) { return reshape(x[0], {}); }, {f64({1, 1}, 3)}, "reshape to a scalar");
}

TEST(ArrayGradients, Transpose) {
  check([](auto& x) { return transpose(x[0]); }, {f64({3, 5}, 1)}, "matrix transpose");
  check([](auto& x) { return transpose(x[0]); }, {f64({2, 3, 4}, 2)}, "reversed rank 3");
  check([](auto& x) { return transpose(x[0], {1, 2, 0}); }, {f64({2, 3, 5}, 3)}, "perm 1 2 0");
  check([](auto& x) { return transpose(x[0], {-1, 0, -2}); }, {f64({2, 3, 5}, 4)}, "negative perm");
  check([](auto& x) { return transpose(x[0], {2, 0, 3, 1}); }, {f64({2, 1, 3, 2}, 5)}, "rank 4");
}

TEST(ArrayGradients, Concat) {
  check([](auto& x) { return concat({x[0], x[1], x[2]}, 0); }, {f64({1, 3}, 1), f64({4, 3}, 2), f64({2, 3}, 3)},
        "axis 0");
  check([](auto& x) { return concat({x[0], x[1]}, -1); }, {f64({2, 3, 1}, 1), f64({2, 3, 4}, 2)}, "axis -1");
  check([](auto& x) { return concat({x[0], x[1], x[0]}, 1); }, {f64({2, 2, 3}, 1), f64({2, 5, 3}, 2)},
        "an input used twice");
  check([](auto& x) { return concat({x[0]}, 0); }, {f64({3}, 1)}, "one input");
}

TEST(ArrayGradients, Slice) {
  check([](auto& x) { return slice(x[0], {1, 2}, {2, 3}); }, {f64({4, 7}, 1)}, "interior window");
  check([](auto& x) { return slice(x[0], {0, 1, 0}, {-1, 2, -1}); }, {f64({3, 5, 2}, 2)}, "size -1");
  check([](auto& x) { return slice(x[0], {0}, {5}); }, {f64({5}, 3)}, "the whole tensor");
}

TEST(ArrayGradients, GatherAxis0WithRepeatedIndices) {
  Tensor idx = constant({2, 0, 2, 2, 4});
  check([&](auto& x) { return gather(x[0], idx); }, {f64({5, 3}, 1)}, "axis 0 int32");
  Tensor idx64 = constant(std::vector<int64_t>{3, 3, 1, 0, 3, 1}, Shape{2, 3});
  check([&](auto& x) { return gather(x[0], idx64); }, {f64({4, 2, 3}, 2)}, "axis 0 int64 2-D indices");
}

TEST(ArrayGradients, GatherInnerAxes) {
  Tensor idx = constant({1, 1, 0, 3});
  check([&](auto& x) { return gather(x[0], idx, 1); }, {f64({3, 4, 2}, 1)}, "axis 1");
  check([&](auto& x) { return gather(x[0], idx, -1); }, {f64({2, 3, 5}, 2)}, "axis -1");
  Tensor idx2 = constant({{2, 0}, {2, 2}});
  check([&](auto& x) { return gather(x[0], idx2, 1); }, {f64({2, 3, 3}, 3)}, "axis 1 with 2-D indices");
  check([&](auto& x) { return gather(x[0], constant(1), 1); }, {f64({2, 3, 2}, 4)}, "scalar index");
  Tensor idx64 = constant(std::vector<int64_t>{0, 2, 2, 0, 0}, Shape{5});
  check([&](auto& x) { return gather(x[0], idx64, -2); }, {f64({3, 3, 1}, 5)}, "axis -2 int64");
}

TEST(ArrayGradients, GatherIndicesGetNoGradient) {
  Tensor x = f64({4, 2}, 1);
  Tensor idx = constant({1, 1, 3});
  GradientTape tape;
  tape.watch(x);
  tape.watch(idx);
  auto g = tape.gradient(reduce_sum(gather(x, idx)), std::vector<Tensor>{x, idx});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 0, 2, 2, 0, 0, 1, 1}));
  EXPECT_EQ(g[1].dtype(), int32);
  EXPECT_EQ(g[1].to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
}

TEST(ArrayGradients, ExpandDimsAndSqueeze) {
  check([](auto& x) { return expand_dims(x[0], 0); }, {f64({3, 2}, 1)}, "expand_dims 0");
  check([](auto& x) { return expand_dims(x[0], -1); }, {f64({3, 2}, 2)}, "expand_dims -1");
  check([](auto& x) { return expand_dims(x[0], 1); }, {f64({3}, 3)}, "expand_dims 1");
  check([](auto& x) { return squeeze(x[0]); }, {f64({1, 3, 1, 2}, 4)}, "squeeze all");
  check([](auto& x) { return squeeze(x[0], {-2}); }, {f64({1, 3, 1, 2}, 5)}, "squeeze -2");
}

TEST(ArrayGradients, IdentityAndPrintPassThrough) {
  check([](auto& x) { return identity(x[0]); }, {f64({2, 3}, 1)}, "identity");
  check([](auto& x) { return identity(x[0], "named"); }, {f64({3}, 2)}, "named identity");
  ::testing::internal::CaptureStderr();  // print writes on every evaluation of the check
  check([](auto& x) { return mul(print(x[0], "x:"), x[0]); }, {f64({3}, 3)}, "print");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("x:"), std::string::npos);
}

TEST(ArrayGradients, BroadcastTo) {
  check([](auto& x) { return broadcast_to(x[0], {4, 3}); }, {f64({3}, 1)}, "rank grows");
  check([](auto& x) { return broadcast_to(x[0], {2, 3, 5}); }, {f64({3, 1}, 2)}, "size-1 dim stretched");
  check([](auto& x) { return broadcast_to(x[0], {2, 3}); }, {f64({}, 3)}, "scalar");
}

TEST(ArrayGradients, UnsortedSegmentSum) {
  Tensor ids = constant({3, 0, 3, 1, 3});
  check([&](auto& x) { return unsorted_segment_sum(x[0], ids, 5); }, {f64({5, 3}, 1)}, "rows, segments 2 and 4 unused");
  Tensor ids2 = constant(std::vector<int64_t>{1, 0, 1, 1, 2, 0}, Shape{2, 3});
  check([&](auto& x) { return unsorted_segment_sum(x[0], ids2, 3); }, {f64({2, 3, 2}, 2)}, "2-D ids");
  check([&](auto& x) { return unsorted_segment_sum(x[0], constant({0, 0, 1}), 2); }, {f64({3}, 3)}, "elements");
}

TEST(ArrayGradients, Pad) {
  check([](auto& x) { return pad(x[0], {{1, 2}, {0, 3}}); }, {f64({3, 5}, 1)}, "2-D");
  check([](auto& x) { return pad(x[0], {{0, 0}, {2, 1}, {0, 0}}); }, {f64({2, 3, 2}, 2)}, "middle dim");
  check([](auto& x) { return pad(x[0], std::vector<int64_t>{3}, std::vector<int64_t>{0}); }, {f64({4}, 3)},
        "two-list form");
}

// A gradient computed inside the checked function: the outer check then differentiates the
// gradients themselves (gather's is segment sums, whose is gathers; slice's is pad, whose is slice).
TEST(ArrayGradients, SecondOrder) {
  Tensor idx = constant({2, 0, 2});
  check([&](auto& x) {
        GradientTape inner;
        inner.watch(x[0]);
        Tensor y = reduce_sum(mul(square(gather(x[0], idx, 1)), 0.5));
        return mul(inner.gradient(y, x[0]), x[0]);
      },
      {f64({2, 3}, 1)}, "through gather");
  check([&](auto& x) {
        GradientTape inner;
        inner.watch(x[0]);
        Tensor y = reduce_sum(square(slice(concat({x[0], x[0]}, 0), {1, 1}, {3, 2})));
        return inner.gradient(y, x[0]);
      },
      {f64({2, 3}, 2)}, "through slice and concat");
}

TEST(ArrayGradients, NotDifferentiableOpsAreNeverRecorded) {
  Tensor x = f64({3}, 1);
  Tensor labels = constant({0, 2, 1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(labels);
  Tensor stopped = stop_gradient(x);
  Tensor hot = one_hot(labels, 3);
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
  EXPECT_EQ(tape.gradient(reduce_sum(mul(stopped, x)), x).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(tape.gradient(reduce_sum(hot), labels).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
}

}  // namespace
}  // namespace weft
