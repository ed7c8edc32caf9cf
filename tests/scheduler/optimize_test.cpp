#include "scheduler/passes/optimize.h"

#include <gtest/gtest.h>

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

constexpr OptimizeOptions kNoFusion{.fusion = false};

TEST(Optimize, PrunesFoldsAndMergesWithoutChangingResults) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "v";
  var->shape = {2};
  var->value = weft::constant({0.f, 0.f});
  g.variables.emplace("v", var);
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t c1 = constant(g, weft::constant({1.f, 2.f}));
  int32_t c2 = constant(g, weft::constant({3.f, 4.f}));
  int32_t c1_again = constant(g, weft::constant({1.f, 2.f}));
  int32_t bias = add(g, "Mul", {{c1, 0}, {c2, 0}});   // folds to [3, 8]
  int32_t a = add(g, "Add", {{x, 0}, {bias, 0}});
  int32_t b = add(g, "Add", {{bias, 0}, {x, 0}});     // a duplicate of a once commuted
  int32_t out = add(g, "Mul", {{a, 0}, {b, 0}});
  int32_t dead = add(g, "Exp", {{x, 0}});
  add(g, "Neg", {{dead, 0}});
  int32_t update = add(g, "AssignVariable", {{c1_again, 0}},
                       {{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{2}}});
  g.args = {x};
  g.results = {{out, 0}};
  const Tensor in = weft::constant({1.f, -1.f});
  const auto before = floats(run_body(g, {&in, 1}));
  var->value = weft::constant({0.f, 0.f});

  EXPECT_EQ(g.num_nodes(), 11);
  optimize(g, {}, {}, kNoFusion);
  // x, the folded bias, one Add, the Mul, the assignment and its (merged) constant.
  EXPECT_EQ(g.num_nodes(), 6);
  EXPECT_EQ(count_of(g, "Add"), 1);
  EXPECT_EQ(count_of(g, "Const"), 2);
  EXPECT_TRUE(g.alive(update));
  EXPECT_FALSE(g.alive(dead));
  EXPECT_EQ(floats(run_body(g, {&in, 1})), before);
  EXPECT_EQ(var->value.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
}

TEST(Optimize, EachPassCanBeTurnedOff) {
  GraphIR g;
  int32_t c1 = constant(g, weft::constant({1.f}));
  int32_t c2 = constant(g, weft::constant({1.f}));
  int32_t sum = add(g, "Add", {{c1, 0}, {c2, 0}});
  g.results = {{sum, 0}};
  GraphIR untouched = g.clone();
  optimize(untouched, {}, {}, {.constant_folding = false, .cse = false, .fusion = false});
  EXPECT_EQ(untouched.num_nodes(), 3);

  GraphIR merged = g.clone();
  optimize(merged, {}, {}, {.constant_folding = false, .cse = true, .fusion = false});
  EXPECT_EQ(merged.num_nodes(), 2);  // one constant read twice

  optimize(g, {}, {}, kNoFusion);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(floats(run_body(g)), (std::vector<std::vector<float>>{{2.f}}));
}

TEST(Optimize, KeepsValuesAndNodesOutsideTheResults) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t e = add(g, "Exp", {{x, 0}}, {}, "e");
  int32_t n = add(g, "Neg", {{e, 0}}, {}, "n");
  int32_t kept = add(g, "Abs", {{x, 0}}, {}, "kept");
  int32_t dropped = add(g, "Square", {{x, 0}}, {}, "dropped");
  g.args = {x};
  const Endpoint fetch{n, 0};
  optimize(g, {&fetch, 1}, {&kept, 1}, kNoFusion);
  EXPECT_TRUE(g.alive(n));
  EXPECT_TRUE(g.alive(e));
  EXPECT_TRUE(g.alive(kept));
  EXPECT_FALSE(g.alive(dropped));
  EXPECT_TRUE(g.results.empty());  // the kept values are not added to the results
}

TEST(Optimize, KeptNodesThatAreFoldedAwayAreNotAnError) {
  GraphIR g;
  int32_t c = constant(g, weft::constant({2.f}));
  int32_t target = add(g, "Neg", {{c, 0}});
  optimize(g, {}, {&target, 1}, kNoFusion);
  EXPECT_FALSE(g.alive(target));  // folded, then unread: nothing of it had to run
}

}  // namespace
}  // namespace weft
