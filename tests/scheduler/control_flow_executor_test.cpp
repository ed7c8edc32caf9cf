// If and While built node by node (as a loaded graph would be) and run by the executor: the
// definitions' checks, the kernels, and side effects inside subgraphs.
#include <gtest/gtest.h>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "scheduler/executor.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

// A function body: args become placeholders, `make` adds the nodes and returns the results.
template <class F>
std::shared_ptr<GraphIR> body(const std::vector<TensorMeta>& args, F make) {
  auto g = std::make_shared<GraphIR>();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < args.size(); ++i)
    ids.push_back(placeholder(*g, args[i].dtype, args[i].shape, "arg_" + std::to_string(i)));
  g->args = ids;
  g->results = make(*g, ids);
  return g;
}

const TensorMeta kScalarF{float32, {}};
const TensorMeta kScalarI{int32, {}};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(ControlFlowExecutor, IfRunsTheBranchTheTakenPredicateNames) {
  auto then_g = body({kScalarF}, [](GraphIR& g, const std::vector<int32_t>& a) {
    int32_t two = constant(g, weft::constant(2.f));
    return std::vector<Endpoint>{{add(g, "Mul", {{a[0], 0}, {two, 0}}), 0}};
  });
  auto else_g = body({kScalarF}, [](GraphIR& g, const std::vector<int32_t>& a) {
    return std::vector<Endpoint>{{add(g, "Neg", {{a[0], 0}}), 0}};
  });
  auto g = std::make_shared<GraphIR>();
  int32_t p = placeholder(*g, bool_, {}, "p");
  int32_t x = placeholder(*g, float32, {}, "x");
  int32_t n = add(*g, "If", {{p, 0}, {x, 0}}, {{"then_branch", GraphAttr(then_g)}, {"else_branch", GraphAttr(else_g)}});
  Executor exec(g, {.feeds = {{p, 0}, {x, 0}}, .fetches = {{n, 0}}});
  EXPECT_EQ(exec.run(std::vector<Tensor>{weft::constant(true), weft::constant(3.f)})[0].item<float>(), 6.f);
  EXPECT_EQ(exec.run(std::vector<Tensor>{weft::constant(false), weft::constant(3.f)})[0].item<float>(), -3.f);
}

TEST(ControlFlowExecutor, WhileCountsItsIterations) {
  // (i, acc, step) -> (i + 1, acc + step) while i < 5; step is a capture.
  std::vector<TensorMeta> args{kScalarI, kScalarF, kScalarF};
  auto cond_g = body(args, [](GraphIR& g, const std::vector<int32_t>& a) {
    int32_t five = constant(g, weft::constant(5));
    return std::vector<Endpoint>{{add(g, "Less", {{a[0], 0}, {five, 0}}), 0}};
  });
  auto body_g = body(args, [](GraphIR& g, const std::vector<int32_t>& a) {
    int32_t one = constant(g, weft::constant(1));
    return std::vector<Endpoint>{{add(g, "Add", {{a[0], 0}, {one, 0}}), 0}, {add(g, "Add", {{a[1], 0}, {a[2], 0}}), 0}};
  });
  auto g = std::make_shared<GraphIR>();
  int32_t i = placeholder(*g, int32, {}, "i");
  int32_t acc = constant(*g, weft::constant(0.f));
  int32_t step = placeholder(*g, float32, {}, "step");
  Attrs attrs{{"cond", GraphAttr(cond_g)}, {"body", GraphAttr(body_g)}, {"num_loop_vars", int64_t{2}}};
  int32_t w = add(*g, "While", {{i, 0}, {acc, 0}, {step, 0}}, attrs);
  ASSERT_EQ(g->node(w).outputs.size(), 3u);
  EXPECT_EQ(g->node(w).outputs[2].dtype, int64);
  Executor exec(g, {.feeds = {{i, 0}, {step, 0}}, .fetches = {{w, 0}, {w, 1}, {w, 2}}});
  std::vector<Tensor> r = exec.run(std::vector<Tensor>{weft::constant(1), weft::constant(0.5f)});
  EXPECT_EQ(r[0].item<int32_t>(), 5);
  EXPECT_EQ(r[1].item<float>(), 2.f);
  EXPECT_EQ(r[2].item<int64_t>(), 4);
  r = exec.run(std::vector<Tensor>{weft::constant(7), weft::constant(0.5f)});
  EXPECT_EQ(r[0].item<int32_t>(), 7);
  EXPECT_EQ(r[2].item<int64_t>(), 0);
  // max_iterations caps the count.
  attrs.set("max_iterations", int64_t{2});
  int32_t capped = add(*g, "While", {{i, 0}, {acc, 0}, {step, 0}}, attrs);
  Executor exec2(g, {.feeds = {{i, 0}, {step, 0}}, .fetches = {{capped, 0}, {capped, 2}}});
  r = exec2.run(std::vector<Tensor>{weft::constant(0), weft::constant(1.f)});
  EXPECT_EQ(r[0].item<int32_t>(), 2);
  EXPECT_EQ(r[1].item<int64_t>(), 2);
}

TEST(ControlFlowExecutor, DefinitionsRejectMalformedSubgraphs) {
  auto identity_f = body({kScalarF}, [](GraphIR&, const std::vector<int32_t>& a) {
    return std::vector<Endpoint>{{a[0], 0}};
  });
  auto int_result = body({kScalarF}, [](GraphIR& g, const std::vector<int32_t>&) {
    return std::vector<Endpoint>{{constant(g, weft::constant(1)), 0}};
  });
  auto g = std::make_shared<GraphIR>();
  int32_t p = placeholder(*g, bool_, {}, "p");
  int32_t x = placeholder(*g, float32, {}, "x");
  int32_t xi = placeholder(*g, int32, {}, "xi");
  auto if_of = [&](std::vector<Endpoint> ins, GraphAttr t, GraphAttr e) {
    return error_of([&] { add(*g, "If", std::move(ins), {{"then_branch", t}, {"else_branch", e}}); });
  };
  EXPECT_NE(if_of({{p, 0}, {x, 0}}, identity_f, int_result).find("[cond] result 0: the then branch returns float32 ()"),
            std::string::npos);
  EXPECT_NE(if_of({{x, 0}, {x, 0}}, identity_f, identity_f).find("[cond] pred must be a bool scalar, got float32 ()"),
            std::string::npos);
  EXPECT_NE(if_of({{p, 0}}, identity_f, identity_f).find("then branch takes 1 arguments, the node passes 0"),
            std::string::npos);
  EXPECT_NE(if_of({{p, 0}, {xi, 0}}, identity_f, identity_f).find("then branch argument 0 is float32 ()"),
            std::string::npos);

  auto while_of = [&](GraphAttr c, GraphAttr b) {
    return error_of([&] {
      add(*g, "While", {{x, 0}}, {{"cond", c}, {"body", b}, {"num_loop_vars", int64_t{1}}});
    });
  };
  EXPECT_NE(while_of(identity_f, identity_f).find("[while_loop] cond's result must be a bool scalar"),
            std::string::npos);
  auto always = body({kScalarF}, [](GraphIR& gr, const std::vector<int32_t>&) {
    return std::vector<Endpoint>{{constant(gr, weft::constant(true)), 0}};
  });
  EXPECT_NE(while_of(always, int_result).find("loop variable 0 enters the loop as float32 () but the body returns int32 ()"),
            std::string::npos);
}

TEST(ControlFlowExecutor, SideEffectsInsideSubgraphsMakeTheNodeATarget) {
  // A branch that prints though its result does not use the print.
  auto printing = body({kScalarF}, [](GraphIR& g, const std::vector<int32_t>& a) {
    add(g, "Print", {{a[0], 0}}, {{"message", std::string("inside: ")}});
    return std::vector<Endpoint>{{a[0], 0}};
  });
  auto quiet = body({kScalarF}, [](GraphIR&, const std::vector<int32_t>& a) { return std::vector<Endpoint>{{a[0], 0}}; });
  // The If node sits in a function body whose result does not read it.
  auto outer = body({TensorMeta{bool_, {}}, kScalarF}, [&](GraphIR& g, const std::vector<int32_t>& a) {
    int32_t n = add(g, "If", {{a[0], 0}, {a[1], 0}},
                    {{"then_branch", GraphAttr(printing)}, {"else_branch", GraphAttr(quiet)}});
    EXPECT_TRUE(has_side_effect(g.node(n)));
    return std::vector<Endpoint>{{a[1], 0}};
  });
  EXPECT_TRUE(has_side_effect(*outer));
  EXPECT_FALSE(has_side_effect(*quiet));
  auto exec = Executor::for_function(outer);
  ::testing::internal::CaptureStderr();
  exec->run(std::vector<Tensor>{weft::constant(true), weft::constant(4.f)});
  exec->run(std::vector<Tensor>{weft::constant(false), weft::constant(5.f)});
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("inside: 4"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("inside: 5"), std::string::npos) << printed;
}

}  // namespace
}  // namespace weft
