#include "scheduler/executor.h"

#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "runtime/device.h"
#include "graph_test_util.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

std::shared_ptr<const GraphIR> relu_of_sum(int32_t* x, int32_t* out) {
  auto g = std::make_shared<GraphIR>();
  *x = placeholder(*g, float32, {-1}, "x");
  int32_t c = constant(*g, weft::constant({1.f, -5.f, 2.f}));
  int32_t sum = add(*g, "Add", {{*x, 0}, {c, 0}});
  *out = add(*g, "Relu", {{sum, 0}});
  return g;
}

TEST(Executor, RunsFetchesFromFeeds) {
  int32_t x, out;
  auto g = relu_of_sum(&x, &out);
  Executor exec(g, {.feeds = {{x, 0}}, .fetches = {{out, 0}}});
  EXPECT_EQ(exec.num_planned_nodes(), 3);
  auto result = exec.run(std::vector<Tensor>{weft::constant({1.f, 2.f, 3.f})});
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(result[0].to_vector<float>(), (std::vector<float>{2.f, 0.f, 5.f}));
  // The plan is reused: a second run with other values.
  result = exec.run(std::vector<Tensor>{weft::constant({-1.f, 6.f, -3.f})});
  EXPECT_EQ(result[0].to_vector<float>(), (std::vector<float>{0.f, 1.f, 0.f}));
}

TEST(Executor, FeedingAnIntermediateValueSkipsItsProducers) {
  int32_t x, out;
  auto g = relu_of_sum(&x, &out);
  const Endpoint sum = g->node(out).inputs[0];
  Executor exec(g, {.feeds = {sum}, .fetches = {{out, 0}}});
  EXPECT_EQ(exec.num_planned_nodes(), 1);
  auto result = exec.run(std::vector<Tensor>{weft::constant({-1.f, 4.f, 0.5f})});
  EXPECT_EQ(result[0].to_vector<float>(), (std::vector<float>{0.f, 4.f, 0.5f}));
}

TEST(Executor, UnfedPlaceholderIsNamed) {
  int32_t x, out;
  auto g = relu_of_sum(&x, &out);
  try {
    Executor exec(g, {.fetches = {{out, 0}}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
}

TEST(Executor, FeedOfWrongShapeOrDtypeIsRejected) {
  int32_t x, out;
  auto g = relu_of_sum(&x, &out);
  Executor exec(g, {.feeds = {{x, 0}}, .fetches = {{out, 0}}});
  EXPECT_THROW(exec.run(std::vector<Tensor>{weft::constant({1, 2, 3})}), InvalidArgument);
  EXPECT_THROW(exec.run(std::vector<Tensor>{weft::constant({{1.f}, {2.f}})}), InvalidArgument);
}

TEST(Executor, KernelErrorNamesTheNode) {
  auto g = std::make_shared<GraphIR>();
  int32_t params = constant(*g, weft::constant({1.f, 2.f}));
  int32_t idx = placeholder(*g, int32, {1}, "idx");
  int32_t gather = add(*g, "GatherV2", {{params, 0}, {idx, 0}}, {}, "lookup");
  Executor exec(g, {.feeds = {{idx, 0}}, .fetches = {{gather, 0}}});
  try {
    exec.run(std::vector<Tensor>{weft::constant({7})});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node 'lookup'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("graph_test.cpp:1"), std::string::npos) << e.what();
  }
}

TEST(Executor, IndependentBranchesRunInParallelWithTheSameResult) {
  auto g = std::make_shared<GraphIR>();
  int32_t x = placeholder(*g, float32, {512, 512}, "x");
  std::vector<Endpoint> branches;
  for (int i = 0; i < 4; ++i) branches.push_back({add(*g, "MatMul", {{x, 0}, {x, 0}}), 0});
  int32_t s1 = add(*g, "Add", {branches[0], branches[1]});
  int32_t s2 = add(*g, "Add", {branches[2], branches[3]});
  int32_t total = add(*g, "Add", {{s1, 0}, {s2, 0}});
  Tensor input = fill({512, 512}, 0.01f);
  Executor par(g, {.feeds = {{x, 0}}, .fetches = {{total, 0}}}, Parallelism::kParallel);
  Executor seq(g, {.feeds = {{x, 0}}, .fetches = {{total, 0}}}, Parallelism::kSequential);
  Executor automatic(g, {.feeds = {{x, 0}}, .fetches = {{total, 0}}});
  // Automatically parallel only where a 512x512 product leaves some of the intra-op pool idle: one
  // of 2^15 elements per thread or more fills it (executor.cpp), as on a pool of 8 threads or less.
  const int threads = cpu_device()->pool().num_threads();
  EXPECT_EQ(automatic.parallel(), 512 * 512 < (int64_t{1} << 15) * threads) << threads << " threads";
  for (int rep = 0; rep < 5; ++rep)
    EXPECT_EQ(par.run(std::vector<Tensor>{input})[0].to_vector<float>(),
              seq.run(std::vector<Tensor>{input})[0].to_vector<float>());
}

TEST(Executor, ElementwiseOpReusesADeadInputBuffer) {
  auto g = std::make_shared<GraphIR>();
  int32_t x = placeholder(*g, float32, {1024}, "x");
  int32_t e = add(*g, "Exp", {{x, 0}});
  int32_t r = add(*g, "Relu", {{e, 0}});
  int32_t n = add(*g, "Neg", {{r, 0}});
  Executor exec(g, {.feeds = {{x, 0}}, .fetches = {{n, 0}}});
  Tensor input = fill({1024}, 0.f);
  auto out = exec.run(std::vector<Tensor>{input});
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(1024, -1.f));
  EXPECT_EQ(input.to_vector<float>(), std::vector<float>(1024, 0.f));  // the fed tensor is never written
}

}  // namespace
}  // namespace weft
