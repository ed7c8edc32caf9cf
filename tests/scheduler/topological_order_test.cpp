// GraphIR::topological_order breaks ties by creation order: the order the executor runs nodes
// that no edge orders, and the order in which passes meet duplicates.
#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "scheduler/executor.h"

namespace weft {
namespace {

using testing::add;
using testing::placeholder;

TEST(TopologicalOrder, NodesReadyTogetherComeInCreationOrder) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t a = add(g, "Exp", {{x, 0}});
  int32_t b = add(g, "Neg", {{x, 0}});
  int32_t c = add(g, "Abs", {{x, 0}});
  int32_t d = add(g, "Add", {{a, 0}, {c, 0}});
  EXPECT_EQ(g.topological_order(), (std::vector<int32_t>{x, a, b, c, d}));
}

TEST(TopologicalOrder, UnorderedAssignmentsRunInCreationOrder) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "v";
  var->shape = {1};
  g.variables.emplace("v", var);
  const Attrs attrs = {{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{1}}};
  int32_t x = placeholder(g, float32, {1}, "x");
  int32_t first = add(g, "Neg", {{x, 0}});
  add(g, "AssignVariable", {{first, 0}}, attrs);
  add(g, "AssignVariable", {{x, 0}}, attrs);  // created last, so it writes last
  g.args = {x};
  const Tensor in = weft::constant({3.f});
  Executor::for_function(std::make_shared<const GraphIR>(std::move(g)))->run({&in, 1});
  EXPECT_EQ(var->value.to_vector<float>(), (std::vector<float>{3.f}));
}

}  // namespace
}  // namespace weft
