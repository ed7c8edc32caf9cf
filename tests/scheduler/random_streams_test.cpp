#include "scheduler/passes/random_streams.h"

#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "pass_test_util.h"
#include "runtime/random_seed.h"

namespace weft {
namespace {

using testing::add;
using testing::floats;
using testing::run_body;

Attrs normal_attrs(int64_t seed) {
  return {{"shape", Shape{4}}, {"mean", 0.0}, {"stddev", 1.0}, {"seed", seed}, {"dtype", float32}};
}

int64_t stream_seed(const GraphIR& g, int32_t id) { return g.node(id).attrs.get<int64_t>("stream_seed"); }

TEST(RandomStreamsPass, GivesUnseededNodesKeysFromTheSequenceInNodeOrder) {
  GraphIR g;
  const int32_t a = add(g, "RandomNormal", {}, normal_attrs(-1));
  const int32_t seeded = add(g, "RandomNormal", {}, normal_attrs(5));
  const int32_t b = add(g, "RandomNormal", {}, normal_attrs(-1));
  const int32_t relu = add(g, "Relu", {{a, 0}});
  g.results = {{relu, 0}, {seeded, 0}, {b, 0}};
  set_global_seed(9);
  EXPECT_EQ(give_random_streams(g), 2);
  set_global_seed(9);
  const int64_t first = resolve_seed(-1), second = resolve_seed(-1);
  EXPECT_EQ(stream_seed(g, a), first);
  EXPECT_EQ(stream_seed(g, b), second);
  EXPECT_EQ(g.node(seeded).attrs.find("stream_seed"), nullptr) << "an explicit seed is the user's";
  EXPECT_EQ(g.node(relu).attrs.find("stream_seed"), nullptr);
  // Given again (a second compilation), new keys replace the old.
  give_random_streams(g);
  EXPECT_NE(stream_seed(g, a), first);
}

TEST(RandomStreamsPass, EachRunOfAnExecutorDrawsANewStreamAndAFreshExecutorStartsOver) {
  GraphIR g;
  const int32_t a = add(g, "RandomNormal", {}, normal_attrs(-1));
  g.results = {{a, 0}};
  give_random_streams(g);
  auto exec = Executor::for_function(std::make_shared<const GraphIR>(g.clone()));
  const auto first = floats(exec->run({})), second = floats(exec->run({}));
  EXPECT_NE(first, second);
  EXPECT_EQ(floats(run_body(g)), first) << "a fresh executor counts the node's runs from 0";
}

TEST(RandomStreamsPass, ABodySharedByTwoAttributesIsCopiedOnceAndTheOriginalIsLeftAlone) {
  auto body = std::make_shared<GraphIR>();
  const int32_t r = add(*body, "RandomNormal", {}, normal_attrs(-1));
  body->results = {{r, 0}};
  GraphIR g;
  const int32_t p = testing::placeholder(g, bool_, {}, "p");
  const int32_t n = add(g, "If", {{p, 0}}, {{"then_branch", GraphAttr(body)}, {"else_branch", GraphAttr(body)}});
  g.args = {p};
  g.results = {{n, 0}};
  EXPECT_EQ(give_random_streams(g), 1);
  const auto& then_g = g.node(n).attrs.get<GraphAttr>("then_branch");
  const auto& else_g = g.node(n).attrs.get<GraphAttr>("else_branch");
  EXPECT_EQ(then_g, else_g) << "the branches shared one body and still do";
  EXPECT_NE(then_g.get(), body.get()) << "the body is copied: other graphs may hold it";
  EXPECT_EQ(body->node(r).attrs.find("stream_seed"), nullptr);
  EXPECT_NE(then_g->node(r).attrs.find("stream_seed"), nullptr);
}

TEST(RandomStreamsPass, AGraphWithoutUnseededRandomNodesIsUntouched) {
  auto body = std::make_shared<GraphIR>();
  const int32_t r = add(*body, "RandomNormal", {}, normal_attrs(3));
  body->results = {{r, 0}};
  GraphIR g;
  const int32_t p = testing::placeholder(g, bool_, {}, "p");
  const int32_t n = add(g, "If", {{p, 0}}, {{"then_branch", GraphAttr(body)}, {"else_branch", GraphAttr(body)}});
  EXPECT_EQ(give_random_streams(g), 0);
  EXPECT_EQ(g.node(n).attrs.get<GraphAttr>("then_branch").get(), body.get());
}

}  // namespace
}  // namespace weft
