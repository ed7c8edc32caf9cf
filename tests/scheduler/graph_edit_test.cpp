// The batch edits passes use to stay linear in the graph's size: remove_nodes and the many-pair
// replace_uses must leave the graph exactly as the one-at-a-time edits would.
#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "pass_test_util.h"
#include "scheduler/passes/constant_fold.h"
#include "scheduler/passes/fuse_elementwise.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

TEST(GraphEdit, RemoveNodesDropsTheirControlEdgesInitializersAndNames) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");
  int32_t b = add(g, "Relu", {{x, 0}}, {}, "b");
  int32_t c = add(g, "Abs", {{x, 0}}, {}, "c");
  g.add_control_input(c, a);
  g.add_control_input(c, b);
  g.add_control_input(c, x);
  g.initializers = {a, c, b};
  const std::vector<int32_t> gone = {a, b};
  g.remove_nodes(gone);
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_FALSE(g.alive(a));
  EXPECT_FALSE(g.alive(b));
  EXPECT_EQ(g.node(c).control_inputs, std::vector<int32_t>{x});
  EXPECT_EQ(g.initializers, std::vector<int32_t>{c});
  EXPECT_EQ(g.find("a"), nullptr);
  EXPECT_EQ(g.unique_name("b"), "b");
  EXPECT_EQ(g.topological_order(), (std::vector<int32_t>{x, c}));
  EXPECT_THROW(g.remove_nodes(gone), Internal);  // already gone
}

TEST(GraphEdit, ReplaceUsesManyPairsAtOnce) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t y = placeholder(g, float32, {2}, "y");
  int32_t a = add(g, "Neg", {{x, 0}});
  int32_t b = add(g, "Neg", {{y, 0}});
  int32_t s = add(g, "Add", {{a, 0}, {b, 0}});
  int32_t t = add(g, "Mul", {{a, 0}, {x, 0}});
  g.results = {{a, 0}, {s, 0}, {b, 0}};
  // Not transitive: what read a now reads b, and what read b reads x.
  const std::vector<std::pair<Endpoint, Endpoint>> pairs = {{{b, 0}, {x, 0}}, {{a, 0}, {b, 0}}};
  g.replace_uses(pairs);
  EXPECT_EQ(g.node(s).inputs, (std::vector<Endpoint>{{b, 0}, {x, 0}}));
  EXPECT_EQ(g.node(t).inputs, (std::vector<Endpoint>{{b, 0}, {x, 0}}));
  EXPECT_EQ(g.results, (std::vector<Endpoint>{{b, 0}, {s, 0}, {x, 0}}));
  EXPECT_EQ(g.node(b).inputs, (std::vector<Endpoint>{{y, 0}}));
}

TEST(GraphEdit, ConstantFoldingAWideGraphKeepsEveryNameAndValue) {
  // Many independent folds with consumers that are not folded: the one-rewrite fold must wire
  // each consumer to its own constant and keep each folded node's name.
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  g.args = {x};
  for (int i = 0; i < 500; ++i) {
    int32_t c = constant(g, weft::constant({static_cast<float>(i), 1.f}));
    int32_t folded = add(g, "Neg", {{c, 0}}, {}, "fold_" + std::to_string(i));
    int32_t used = add(g, "Add", {{x, 0}, {folded, 0}}, {}, "use_" + std::to_string(i));
    g.add_control_input(used, folded);
    g.results.push_back({used, 0});
  }
  const Tensor in = weft::constant({0.5f, 0.25f});
  const auto before = testing::floats(testing::run_body(g, {&in, 1}));
  EXPECT_EQ(constant_fold(g), 500);
  for (int i = 0; i < 500; ++i) {
    const Node* folded = g.find("fold_" + std::to_string(i));
    ASSERT_NE(folded, nullptr);
    EXPECT_EQ(folded->type(), "Const");
    const Node& use = *g.find("use_" + std::to_string(i));
    EXPECT_EQ(use.inputs[1].node, folded->id);
    EXPECT_TRUE(use.control_inputs.empty());
  }
  EXPECT_EQ(testing::floats(testing::run_body(g, {&in, 1})), before);
}

TEST(GraphEdit, FusingManyGroupsAtOnceKeepsEdgesBetweenThem) {
  // Two groups, the second reading the first's root and waiting (by a control edge) for one of
  // its inner nodes, and an outside node waiting for the second's inner node.
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t y = placeholder(g, float32, {4}, "y");
  g.args = {x, y};
  int32_t sum_a = add(g, "Add", {{x, 0}, {y, 0}}, {}, "sum_a");
  int32_t a = add(g, "Relu", {{sum_a, 0}}, {}, "a");
  int32_t mul_b = add(g, "Mul", {{a, 0}, {y, 0}}, {}, "mul_b");
  int32_t b = add(g, "Tanh", {{mul_b, 0}}, {}, "b");
  int32_t after = add(g, "Neg", {{x, 0}}, {}, "after");
  g.add_control_input(mul_b, sum_a);
  g.add_control_input(after, mul_b);
  g.results = {{a, 0}, {b, 0}, {after, 0}};  // a is a result: it stays a group's root
  const Tensor in_x = weft::constant({1.f, -2.f, 3.f, -4.f});
  const Tensor in_y = weft::constant({0.5f, 0.5f, -1.f, 2.f});
  const std::vector<Tensor> args = {in_x, in_y};
  const auto before = testing::floats(testing::run_body(g, args));

  EXPECT_EQ(fuse_elementwise(g), 2);
  const Node& fa = *g.find("a");
  const Node& fb = *g.find("b");
  EXPECT_EQ(fa.type(), "FusedElementwise");
  EXPECT_EQ(fb.type(), "FusedElementwise");
  EXPECT_EQ(fb.control_inputs, std::vector<int32_t>{fa.id});
  EXPECT_NE(std::find(fb.inputs.begin(), fb.inputs.end(), Endpoint{fa.id, 0}), fb.inputs.end());
  EXPECT_EQ(g.find("after")->control_inputs, std::vector<int32_t>{fb.id});
  EXPECT_EQ(g.results[0], (Endpoint{fa.id, 0}));
  EXPECT_EQ(g.results[1], (Endpoint{fb.id, 0}));
  EXPECT_EQ(testing::floats(testing::run_body(g, args)), before);
}

}  // namespace
}  // namespace weft
