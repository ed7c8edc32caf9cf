#include "scheduler/passes/prune.h"

#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "pass_test_util.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::floats;
using testing::placeholder;
using testing::run_body;

Attrs var_attrs(const std::string& name, Shape shape) {
  return {{"var", name}, {"dtype", float32}, {"shape", std::move(shape)}};
}

TEST(Prune, DropsStatelessWorkNoResultNeeds) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {3}, "x");
  int32_t c = constant(g, weft::constant({1.f, -5.f, 2.f}));
  int32_t sum = add(g, "Add", {{x, 0}, {c, 0}});
  int32_t dead = add(g, "Mul", {{x, 0}, {x, 0}});
  add(g, "Relu", {{dead, 0}});
  g.args = {x};
  g.results = {{sum, 0}};
  const Tensor in = weft::constant({1.f, 2.f, 3.f});
  const auto before = floats(run_body(g, {&in, 1}));

  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(prune(g, {}), 2);
  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_FALSE(g.alive(dead));
  EXPECT_EQ(floats(run_body(g, {&in, 1})), before);
  EXPECT_EQ(prune(g, {}), 0);  // nothing left to remove
}

TEST(Prune, KeepsSideEffectsAndWhatTheyRead) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "v";
  var->shape = {2};
  var->value = weft::constant({1.f, 2.f});
  g.variables.emplace("v", var);
  int32_t c = constant(g, weft::constant({5.f, 6.f}));
  int32_t twice = add(g, "Add", {{c, 0}, {c, 0}});
  int32_t assign = add(g, "AssignVariable", {{twice, 0}}, var_attrs("v", {2}));
  // A read nothing uses is stateful but has no effect: it goes, as does the stateless Neg.
  int32_t read = add(g, "ReadVariable", {}, var_attrs("v", {2}));
  int32_t neg = add(g, "Neg", {{c, 0}});

  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(prune(g, {}), 2);
  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_TRUE(g.alive(assign));
  EXPECT_TRUE(g.alive(twice));
  EXPECT_TRUE(g.alive(c));
  EXPECT_FALSE(g.alive(read));
  EXPECT_FALSE(g.alive(neg));
  run_body(g);  // the assignment still runs
  EXPECT_EQ(var->value.to_vector<float>(), (std::vector<float>{10.f, 12.f}));
}

TEST(Prune, KeepsFetchesKeptNodesAndTheirControlInputs) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t mid = add(g, "Exp", {{x, 0}}, {}, "mid");
  int32_t top = add(g, "Neg", {{mid, 0}}, {}, "top");
  int32_t before_noop = add(g, "Relu", {{x, 0}}, {}, "ordered");
  int32_t noop = add(g, "NoOp", {}, {}, "group");
  g.add_control_input(noop, before_noop);
  int32_t unrelated = add(g, "Abs", {{x, 0}}, {}, "unrelated");

  const Endpoint fetch{mid, 0};
  EXPECT_EQ(g.num_nodes(), 6);
  EXPECT_EQ(prune(g, {&fetch, 1}, {&noop, 1}), 2);
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_TRUE(g.alive(mid));
  EXPECT_TRUE(g.alive(x));
  EXPECT_TRUE(g.alive(noop));
  EXPECT_TRUE(g.alive(before_noop));  // needed by a kept node through a control edge only
  EXPECT_FALSE(g.alive(top));
  EXPECT_FALSE(g.alive(unrelated));

  // The fetch still runs on the pruned graph.
  Executor exec(std::make_shared<const GraphIR>(g.clone()), {.feeds = {{x, 0}}, .fetches = {fetch}});
  auto out = exec.run(std::vector<Tensor>{weft::constant({0.f, 0.f})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1.f, 1.f}));
}

TEST(Prune, KeepsUnusedArgsAndInitializers) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "w";
  var->shape = {1};
  g.variables.emplace("w", var);
  int32_t unused = placeholder(g, float32, {1}, "unused");
  int32_t used = placeholder(g, float32, {1}, "used");
  int32_t init_value = constant(g, weft::constant({3.f}));
  int32_t init = add(g, "AssignVariable", {{init_value, 0}}, var_attrs("w", {1}));
  g.initializers = {init};
  int32_t out = add(g, "Neg", {{used, 0}});
  g.args = {unused, used};
  g.results = {{out, 0}};
  // No one reads the first argument, but the function's signature still has it.
  EXPECT_EQ(prune(g, {}), 0);
  EXPECT_TRUE(g.alive(unused));
  EXPECT_TRUE(g.alive(init_value));
}

TEST(Prune, AskingToKeepAMissingNodeIsAnError) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {1}, "x");
  const int32_t missing = x + 7;
  EXPECT_THROW(prune(g, {}, {&missing, 1}), InvalidArgument);
}

}  // namespace
}  // namespace weft
