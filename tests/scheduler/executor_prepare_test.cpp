// Kernel state prepared once per node (OpDef::prepare): the executor derives it when it is made,
// hands it to every run's kernel as KernelContext::prepared, and leaves a node whose preparation
// fails to its kernel, which reports the error at run time as it would unprepared.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "scheduler/executor.h"

namespace weft {
namespace {

using testing::add;
using testing::placeholder;

// PrepareTestScale(x; factor) = factor * x. Its prepared state is the factor read from the
// attributes; a negative factor is refused by prepare and by the kernel alike.
std::atomic<int> g_prepared{0};        // prepare calls
std::atomic<int> g_runs_prepared{0};   // kernel runs handed a prepared state
std::atomic<int> g_runs_unprepared{0};

float factor_of(const Attrs& attrs) {
  const double f = attrs.get<double>("factor");
  if (f < 0) throw InvalidArgument("[prepare_test_scale] factor " + std::to_string(f) + " is negative");
  return static_cast<float>(f);
}

std::shared_ptr<const void> prepare_scale(const Attrs& attrs, int /*num_inputs*/) {
  ++g_prepared;
  return std::make_shared<float>(factor_of(attrs));
}

void scale_kernel(KernelContext& ctx) {
  float factor;
  if (ctx.prepared) {
    ++g_runs_prepared;
    factor = *static_cast<const float*>(ctx.prepared);
  } else {
    ++g_runs_unprepared;
    factor = factor_of(ctx.attrs);
  }
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  for (int64_t i = 0; i < ctx.input(0).size(); ++i) y[i] = factor * x[i];
}

void register_scale() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_ops();
    op_registry().add({.name = "PrepareTestScale", .display = "prepare_test_scale", .min_inputs = 1,
                       .max_inputs = 1, .attrs = {{"factor", AttrType::Float}},
                       .infer = [](InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
                       .prepare = prepare_scale});
    register_kernel("PrepareTestScale", DeviceType::CPU, float32, scale_kernel);
  });
}

std::unique_ptr<Executor> scale_graph(double factor, int32_t* x_out) {
  auto g = std::make_shared<GraphIR>();
  const int32_t x = placeholder(*g, float32, {2}, "x");
  const int32_t y = add(*g, "PrepareTestScale", {{x, 0}}, {{"factor", factor}}, "scaled");
  *x_out = x;
  return std::make_unique<Executor>(g, ExecutorSpec{.feeds = {{x, 0}}, .fetches = {{y, 0}}});
}

TEST(ExecutorPrepare, EachNodeIsPreparedOnceAndEveryRunIsHandedTheState) {
  register_scale();
  const int prepared = g_prepared, with = g_runs_prepared, without = g_runs_unprepared;
  int32_t x;
  auto exec = scale_graph(3.0, &x);
  EXPECT_EQ(g_prepared - prepared, 1);
  for (int run = 0; run < 3; ++run) {
    auto out = exec->run(std::vector<Tensor>{weft::constant({1.f, -2.f})});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3.f, -6.f}));
  }
  EXPECT_EQ(g_prepared - prepared, 1);
  EXPECT_EQ(g_runs_prepared - with, 3);
  EXPECT_EQ(g_runs_unprepared - without, 0);
}

TEST(ExecutorPrepare, AFailedPreparationIsReportedByTheKernelAtRunTimeNamingTheNode) {
  register_scale();
  const int without = g_runs_unprepared;
  int32_t x;
  auto exec = scale_graph(-1.0, &x);  // no error yet: the graph may never be run
  try {
    exec->run(std::vector<Tensor>{weft::constant({1.f, 2.f})});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("factor -1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node 'scaled'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g_runs_unprepared - without, 1);
}

}  // namespace
}  // namespace weft
