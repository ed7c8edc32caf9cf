#include "scheduler/passes/constant_fold.h"

#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "pass_test_util.h"
#include "scheduler/passes/prune.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::count_of;
using testing::floats;
using testing::placeholder;
using testing::run_body;

TEST(ConstantFold, FoldsAChainOfConstantsIntoOne) {
  GraphIR g;
  int32_t c1 = constant(g, weft::constant({1.f, 2.f}));
  int32_t c2 = constant(g, weft::constant({3.f, 4.f}));
  int32_t c3 = constant(g, weft::constant({10.f, -1.f}));
  int32_t sum = add(g, "Add", {{c1, 0}, {c2, 0}});
  int32_t product = add(g, "Mul", {{sum, 0}, {c3, 0}}, {}, "product");
  g.results = {{product, 0}};
  const auto before = floats(run_body(g));

  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(constant_fold(g), 2);
  // Each folded node became a Const: the three inputs and the folded sum have no readers left,
  // and prune (the next pass of the pipeline) drops them.
  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(count_of(g, "Add") + count_of(g, "Mul"), 0);
  EXPECT_EQ(prune(g, {}), 4);
  ASSERT_EQ(g.num_nodes(), 1);
  const Node& folded = g.node(g.results[0].node);
  EXPECT_EQ(folded.type(), "Const");
  EXPECT_EQ(folded.name, "product");  // the folded node's name lives on
  EXPECT_EQ(folded.attrs.get<Tensor>("value").to_vector<float>(), (std::vector<float>{40.f, -6.f}));
  EXPECT_EQ(floats(run_body(g)), before);
}

TEST(ConstantFold, FoldsOnlyWhatDependsOnConstantsAlone) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {2}, "x");
  int32_t c = constant(g, weft::constant({1.f, 2.f}));
  int32_t neg = add(g, "Neg", {{c, 0}});
  int32_t mixed = add(g, "Add", {{x, 0}, {neg, 0}});
  int32_t reshaped = add(g, "Reshape", {{neg, 0}}, {{"shape", Shape{2, 1}}});  // a view, no kernel
  g.args = {x};
  g.results = {{mixed, 0}, {reshaped, 0}};
  const Tensor in = weft::constant({5.f, 5.f});
  const auto before = floats(run_body(g, {&in, 1}));

  EXPECT_EQ(constant_fold(g), 2);  // Neg and Reshape; the Add reads a placeholder
  EXPECT_TRUE(g.alive(mixed));
  EXPECT_EQ(g.node(g.results[1].node).type(), "Const");
  EXPECT_EQ(g.node(g.results[1].node).outputs[0].shape, (Shape{2, 1}));
  EXPECT_EQ(floats(run_body(g, {&in, 1})), before);
}

TEST(ConstantFold, LeavesStatefulOpsAndWhatTheyFeed) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "v";
  var->shape = {3};
  var->value = weft::constant({1.f, 2.f, 3.f});
  g.variables.emplace("v", var);
  int32_t noise = add(g, "RandomNormal", {},
                      {{"shape", Shape{3}}, {"mean", 0.0}, {"stddev", 1.0}, {"seed", int64_t{7}}, {"dtype", float32}});
  int32_t read = add(g, "ReadVariable", {}, {{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{3}}});
  int32_t sum = add(g, "Add", {{noise, 0}, {read, 0}});
  g.results = {{sum, 0}};

  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_EQ(constant_fold(g), 0);
  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_EQ(count_of(g, "Const"), 0);
}

TEST(ConstantFold, WaitsOnAControlInputThatIsNotAConstant) {
  GraphIR g;
  auto var = std::make_shared<VariableState>();
  var->name = "v";
  var->shape = {1};
  g.variables.emplace("v", var);
  int32_t c = constant(g, weft::constant({4.f}));
  int32_t assign = add(g, "AssignVariable", {{c, 0}}, {{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{1}}});
  int32_t after = add(g, "Neg", {{c, 0}});
  g.add_control_input(after, assign);
  g.results = {{after, 0}};
  EXPECT_EQ(constant_fold(g), 0);
  EXPECT_TRUE(g.alive(after));
}

TEST(ConstantFold, RespectsMaxBytes) {
  GraphIR g;
  int32_t c = constant(g, weft::fill({1000}, 1.f));
  int32_t neg = add(g, "Neg", {{c, 0}});
  g.results = {{neg, 0}};
  const auto before = floats(run_body(g));
  EXPECT_EQ(constant_fold(g, 3999), 0);  // 1000 floats are 4000 bytes
  EXPECT_TRUE(g.alive(neg));
  EXPECT_EQ(constant_fold(g, 4000), 1);
  EXPECT_FALSE(g.alive(neg));
  EXPECT_EQ(floats(run_body(g)), before);
}

TEST(ConstantFold, AFailingKernelIsLeftForRunTime) {
  GraphIR g;
  int32_t params = constant(g, weft::constant({1.f, 2.f}));
  int32_t index = constant(g, weft::constant({7}));
  int32_t gather = add(g, "GatherV2", {{params, 0}, {index, 0}}, {}, "lookup");
  g.results = {{gather, 0}};
  EXPECT_EQ(constant_fold(g), 0);  // no throw while folding
  EXPECT_TRUE(g.alive(gather));
  try {
    run_body(g);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node 'lookup'"), std::string::npos) << e.what();
  }
}

TEST(ConstantFold, FoldsEveryOutputOfAMultiOutputNode) {
  GraphIR g;
  int32_t logits = constant(g, weft::constant({{1.f, 2.f, 3.f}, {0.f, 0.f, 5.f}}));
  int32_t labels = constant(g, weft::constant({2, 0}));
  int32_t xent = add(g, "SparseSoftmaxCrossEntropyWithLogits", {{logits, 0}, {labels, 0}}, {}, "xent");
  int32_t loss = add(g, "Neg", {{xent, 0}});
  g.results = {{loss, 0}, {xent, 1}};
  const auto before = floats(run_body(g));

  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(constant_fold(g), 2);  // the loss, then the Neg reading it
  EXPECT_EQ(prune(g, {}), 3);      // the inputs and the loss's now unread first output
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(count_of(g, "Const"), 2);
  EXPECT_NE(g.find("xent_1"), nullptr);  // the second output's constant, named after the node
  EXPECT_EQ(floats(run_body(g)), before);
}

}  // namespace
}  // namespace weft
