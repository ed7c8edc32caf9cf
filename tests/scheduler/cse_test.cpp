#include "scheduler/passes/cse.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "pass_test_util.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::count_of;
using testing::floats;
using testing::placeholder;
using testing::run_body;

Attrs normal_attrs() {
  return {{"shape", Shape{4}}, {"mean", 0.0}, {"stddev", 1.0}, {"seed", int64_t{3}}, {"dtype", float32}};
}

TEST(Cse, MergesDuplicatesAndCommutedInputsOfCommutativeOps) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {3}, "x");
  int32_t y = placeholder(g, float32, {3}, "y");
  int32_t xy = add(g, "Add", {{x, 0}, {y, 0}});
  int32_t yx = add(g, "Add", {{y, 0}, {x, 0}});
  int32_t xy_again = add(g, "Add", {{x, 0}, {y, 0}});
  // Once the Adds are merged these two read the same value, so they merge as well.
  int32_t r1 = add(g, "Relu", {{xy, 0}});
  int32_t r2 = add(g, "Relu", {{yx, 0}});
  int32_t out = add(g, "Mul", {{r1, 0}, {r2, 0}});
  g.args = {x, y};
  g.results = {{out, 0}, {xy_again, 0}};
  const std::vector<Tensor> in = {weft::constant({1.f, -2.f, 3.f}), weft::constant({0.5f, 1.f, -4.f})};
  const auto before = floats(run_body(g, in));

  EXPECT_EQ(g.num_nodes(), 8);
  EXPECT_EQ(eliminate_common_subexpressions(g), 3);
  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(count_of(g, "Add"), 1);
  EXPECT_EQ(count_of(g, "Relu"), 1);
  EXPECT_EQ(g.results[1], (Endpoint{xy, 0}));  // results follow the survivor
  EXPECT_EQ(g.node(out).inputs[0], g.node(out).inputs[1]);
  EXPECT_EQ(floats(run_body(g, in)), before);
}

TEST(Cse, KeepsOperandOrderOfNonCommutativeOps) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t y = placeholder(g, float32, {2}, "y");
  int32_t a = add(g, "Sub", {{x, 0}, {y, 0}});
  int32_t b = add(g, "Sub", {{y, 0}, {x, 0}});
  g.results = {{a, 0}, {b, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 0);
  EXPECT_EQ(g.num_nodes(), 4);
}

TEST(Cse, NeverMergesStatefulOps) {
  GraphIR g;
  int32_t n1 = add(g, "RandomNormal", {}, normal_attrs());
  int32_t n2 = add(g, "RandomNormal", {}, normal_attrs());
  int32_t sum = add(g, "Add", {{n1, 0}, {n2, 0}});
  g.results = {{sum, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 0);
  EXPECT_EQ(count_of(g, "RandomNormal"), 2);
}

TEST(Cse, DifferentAttributesAreDifferentComputations) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2, 3}, "x");
  int32_t col = add(g, "Reshape", {{x, 0}}, {{"shape", Shape{6, 1}}});
  int32_t row = add(g, "Reshape", {{x, 0}}, {{"shape", Shape{1, 6}}});
  int32_t col_again = add(g, "Reshape", {{x, 0}}, {{"shape", Shape{6, 1}}});
  g.args = {x};
  g.results = {{col, 0}, {row, 0}, {col_again, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 1);
  EXPECT_TRUE(g.alive(row));
  EXPECT_FALSE(g.alive(col_again));
  EXPECT_EQ(g.results[2], (Endpoint{col, 0}));
}

TEST(Cse, MergesEqualConstantsOnly) {
  GraphIR g;
  int32_t a = constant(g, weft::constant({1.f, 2.f}));
  int32_t same = constant(g, weft::constant({1.f, 2.f}));
  int32_t other_value = constant(g, weft::constant({1.f, 3.f}));
  int32_t other_dtype = constant(g, weft::constant({1, 2}));
  int32_t other_shape = constant(g, weft::constant({{1.f, 2.f}}));
  int32_t s1 = add(g, "Add", {{a, 0}, {other_value, 0}});
  int32_t s2 = add(g, "Add", {{same, 0}, {other_value, 0}});
  int32_t prod = add(g, "Mul", {{s1, 0}, {s2, 0}});
  int32_t cast = add(g, "Cast", {{other_dtype, 0}}, {{"dtype", float32}});
  g.results = {{prod, 0}, {cast, 0}, {other_shape, 0}};
  const auto before = floats(run_body(g));

  EXPECT_EQ(g.num_nodes(), 9);
  EXPECT_EQ(eliminate_common_subexpressions(g), 2);  // the equal constant, then the Add reading it
  EXPECT_EQ(g.num_nodes(), 7);
  EXPECT_FALSE(g.alive(same));
  EXPECT_FALSE(g.alive(s2));
  EXPECT_EQ(count_of(g, "Const"), 4);
  EXPECT_EQ(floats(run_body(g)), before);
}

TEST(Cse, ControlEdgesMoveToTheSurvivor) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t first = add(g, "Exp", {{x, 0}});
  int32_t dup = add(g, "Exp", {{x, 0}});
  int32_t group = add(g, "NoOp", {});
  g.add_control_input(group, dup);
  g.results = {{first, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 1);
  EXPECT_EQ(g.node(group).control_inputs, (std::vector<int32_t>{first}));
}

TEST(Cse, SameOpOnDifferentDevicesIsKept) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t a = add(g, "Exp", {{x, 0}});
  int32_t b = add(g, "Exp", {{x, 0}});
  g.node(b).requested_device = "/cpu:1";
  g.results = {{a, 0}, {b, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 0);
}

TEST(Cse, DifferentControlInputsAreDifferentComputations) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t barrier = add(g, "NoOp", {});
  int32_t a = add(g, "Exp", {{x, 0}});
  int32_t b = add(g, "Exp", {{x, 0}});
  g.add_control_input(b, barrier);
  g.results = {{a, 0}, {b, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 0);
}

}  // namespace
}  // namespace weft
