// cond and while_loop: eager and traced results agree, errors are clear, side effects inside a
// traced branch happen only when it runs, and gradients through If and While match finite
// differences and the eager gradient, also when taken inside a traced function.
#include "api/control_flow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

void expect_near(const Tensor& a, const Tensor& b, double tol = 1e-9, const std::string& what = "") {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<double> x = cast(a, float64).to_vector<double>(), y = cast(b, float64).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol * std::max(1.0, std::abs(y[i]))) << what << " [" << i << "]";
}

int count_ops(const Graph& g, const std::string& type) {
  int n = 0;
  for (const Operation& op : g.operations()) n += op.type() == type;
  return n;
}

// ---- cond -------------------------------------------------------------------------------------

Tensor signed_double(const Tensor& x) {
  return cond(reduce_sum(x) > 0., [&] { return x * 2.; }, [&] { return -x; });
}

TEST(Cond, EagerAndTracedAgreeOnBothBranches) {
  auto f = function([](Tensor x) { return signed_double(x); });
  for (const Tensor& x : {constant({1.0, 2.0, -0.5}), constant({-1.0, 0.5, -3.0})}) {
    Tensor eager = signed_double(x);
    EXPECT_FALSE(eager.is_symbolic());
    expect_near(f(x), eager);
  }
  EXPECT_EQ(f.tracing_count(), 1);  // one graph holds both branches
  EXPECT_EQ(count_ops(f.graph(constant({1.0, 2.0, -0.5})), "If"), 1);
  EXPECT_EQ(signed_double(constant({1.0, 2.0})).to_vector<double>(), (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(signed_double(constant({-1.0, -2.0})).to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST(Cond, CapturesOuterTensorsOfEitherBranch) {
  Tensor k = constant({10.f, 20.f});  // an eager tensor: a constant inside the branch
  auto body = [&](Tensor p, Tensor x, Tensor y, Tensor z) {
    Tensor xy = x * y;  // computed outside, used by one branch only
    return cond(
        p, [&] { return xy + k; }, [&] { return x - z; });
  };
  auto f = function(body);
  Tensor x = constant({1.f, 2.f}), y = constant({3.f, 4.f}), z = constant({0.5f, 0.25f});
  for (bool p : {true, false}) expect_near(f(constant(p), x, y, z), body(constant(p), x, y, z));
  EXPECT_EQ(f(constant(true), x, y, z).to_vector<float>(), (std::vector<float>{13.f, 28.f}));
  EXPECT_EQ(f(constant(false), x, y, z).to_vector<float>(), (std::vector<float>{0.5f, 1.75f}));
}

TEST(Cond, VectorFormAndScalarPredicateFromData) {
  auto body = [](Tensor a, Tensor b) {
    return cond(
        less(reduce_max(a), reduce_max(b)), [&]() -> std::vector<Tensor> { return {a + b, a * b}; },
        [&]() -> std::vector<Tensor> { return {a - b, b}; });
  };
  auto f = function(body);
  Tensor a = constant({1, 5}), b = constant({3, 4});
  for (const auto& [p, q] : {std::pair{a, b}, std::pair{b, a}}) {
    std::vector<Tensor> traced = f(p, q), eager = body(p, q);
    ASSERT_EQ(traced.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(traced[i].to_vector<int32_t>(), eager[i].to_vector<int32_t>());
  }
  EXPECT_EQ(f(a, b)[0].to_vector<int32_t>(), (std::vector<int32_t>{-2, 1}));  // max(a) 5 > max(b) 4: else
}

TEST(Cond, BranchShapesThatDifferBecomeUnknown) {
  auto f = function([](Tensor p, Tensor x) {
    Tensor y = cond(p, [&] { return x; }, [&] { return concat({x, x}, 0); });
    EXPECT_EQ(y.shape(), Shape({-1}));
    return y;
  });
  Tensor x = constant({1.f, 2.f});
  EXPECT_EQ(f(constant(true), x).shape(), Shape({2}));
  EXPECT_EQ(f(constant(false), x).shape(), Shape({4}));
}

TEST(Cond, NestedInsideAGraphScope) {
  Graph g;
  Tensor y;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {2}, "x");
    Tensor p = placeholder(bool_, {}, "p");
    y = identity(cond(p, [&] { return cond(reduce_sum(x) > 0.f, [&] { return x * 10.f; }, [&] { return x; }); },
                      [&] { return x - 1.f; }),
                 "y");
  }
  Session sess(g);
  auto run = [&](bool p, std::vector<float> x) {
    return sess.run({{"x:0", constant(x, {2})}, {"p:0", constant(p)}}, {"y:0"})[0].to_vector<float>();
  };
  EXPECT_EQ(run(true, {1.f, 2.f}), (std::vector<float>{10.f, 20.f}));
  EXPECT_EQ(run(true, {-1.f, -2.f}), (std::vector<float>{-1.f, -2.f}));
  EXPECT_EQ(run(false, {1.f, 2.f}), (std::vector<float>{0.f, 1.f}));
}

TEST(Cond, BranchDtypeMismatchIsInvalidArgument) {
  auto f = function([](Tensor x) { return cond(reduce_sum(x) > 0.f, [&] { return x; }, [&] { return cast(x, int32); }); });
  try {
    f(constant({1.f}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[cond]"), std::string::npos) << what;
    EXPECT_NE(what.find("then branch returns float32 (1,), the else branch returns int32 (1,)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("control_flow_test.cpp"), std::string::npos) << what;  // the user's line
  }
  auto g = function([](Tensor x) {
    return cond(
        reduce_sum(x) > 0.f, [&]() -> std::vector<Tensor> { return {x, x}; },
        [&]() -> std::vector<Tensor> { return {x}; });
  });
  EXPECT_THROW(g(constant({1.f})), InvalidArgument);
}

TEST(Cond, NonBoolPredicateIsInvalidArgument) {
  Tensor x = constant({1.f, 2.f});
  auto branch = [&] { return x; };
  for (const Tensor& pred : {constant(1.f), constant({true, false})}) {
    EXPECT_THROW(cond(pred, branch, branch), InvalidArgument);
    auto f = function([&](Tensor p) { return cond(p, branch, branch); });
    EXPECT_THROW(f(pred), InvalidArgument);
  }
  try {
    cond(constant(1), branch, branch);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[cond] pred must be a bool scalar, got int32 ()"), std::string::npos)
        << e.what();
  }
}

TEST(Cond, PrintInATracedBranchPrintsOnlyWhenItRuns) {
  auto f = function([](Tensor x) {
    return cond(
        reduce_sum(x) > 0.f, [&] { return print(x, "then: "); },
        [&] {
          print(x, "else: ");  // only a side effect: its value is not returned
          return -x;
        });
  });
  Tensor pos = constant({1.f}), neg = constant({-1.f});
  ::testing::internal::CaptureStderr();
  f(pos);
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("then: "), std::string::npos) << printed;
  EXPECT_EQ(printed.find("else: "), std::string::npos) << printed;
  ::testing::internal::CaptureStderr();
  f(neg);
  f(neg);
  printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed.find("then: "), std::string::npos) << printed;
  size_t first = printed.find("else: ");
  ASSERT_NE(first, std::string::npos) << printed;
  EXPECT_NE(printed.find("else: ", first + 1), std::string::npos) << "prints on every call: " << printed;
}

TEST(Cond, VariableAssignInATracedBranchHappensOnlyWhenTaken) {
  Variable v(constant(0.f), "v");
  // Returns nothing: the If node runs because its branches assign.
  auto update = function([&](Tensor x) {
    cond(
        x > 0.f,
        [&] {
          v.assign_add(x);
          return x;
        },
        [&] {
          v.assign_sub(x * 10.f);
          return x;
        });
  });
  update(constant(1.f));
  EXPECT_EQ(v.value().item<float>(), 1.f);
  update(constant(-2.f));
  EXPECT_EQ(v.value().item<float>(), 21.f);
  // Reads after the If see its write; reads before it do not.
  auto step = function([&](Tensor x) -> std::vector<Tensor> {
    Tensor before = v.value();
    cond(
        x > 0.f,
        [&] {
          v.assign(x);
          return x;
        },
        [&] { return x; });
    return {before, v.value()};
  });
  std::vector<Tensor> r = step(constant(5.f));
  EXPECT_EQ(r[0].item<float>(), 21.f);
  EXPECT_EQ(r[1].item<float>(), 5.f);
  r = step(constant(-5.f));
  EXPECT_EQ(r[0].item<float>(), 5.f);
  EXPECT_EQ(r[1].item<float>(), 5.f);
}

TEST(Cond, CreatingAVariableInsideATracedBranchFails) {
  auto f = function([](Tensor x) {
    return cond(
        x > 0.f,
        [&] {
          Variable w(constant(1.f), "w");
          return x * w;
        },
        [&] { return x; });
  });
  EXPECT_THROW(f(constant(1.f)), FailedPrecondition);
}

// ---- while_loop -------------------------------------------------------------------------------

std::vector<Tensor> sum_to(const Tensor& n) {
  return while_loop([&](const std::vector<Tensor>& v) { return v[0] <= n; },
                    [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, v[1] + v[0]}; },
                    {constant(1), constant(0)});
}

TEST(WhileLoop, SumOneToN) {
  auto f = function([](Tensor n) { return sum_to(n); });
  for (int n : {0, 1, 10, 100}) {
    std::vector<Tensor> eager = sum_to(constant(n)), traced = f(constant(n));
    ASSERT_EQ(traced.size(), 2u);
    EXPECT_EQ(eager[1].item<int32_t>(), n * (n + 1) / 2);
    EXPECT_EQ(traced[1].item<int32_t>(), n * (n + 1) / 2);
    EXPECT_EQ(traced[0].item<int32_t>(), n + 1);
  }
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(count_ops(f.graph(constant(3)), "While"), 1);
}

std::vector<Tensor> fibonacci(const Tensor& n) {
  return while_loop(
      [&](const std::vector<Tensor>& v) { return less(v[0], n); },
      [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + int64_t{1}, v[2], v[1] + v[2]}; },
      {constant(int64_t{0}), constant(int64_t{0}), constant(int64_t{1})});
}

TEST(WhileLoop, Fibonacci) {
  auto f = function([](Tensor n) { return fibonacci(n)[1]; });
  const std::vector<int64_t> fib = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55};
  for (int64_t n = 0; n < static_cast<int64_t>(fib.size()); ++n) {
    EXPECT_EQ(fibonacci(constant(n))[1].item<int64_t>(), fib[static_cast<size_t>(n)]);
    EXPECT_EQ(f(constant(n)).item<int64_t>(), fib[static_cast<size_t>(n)]);
  }
  EXPECT_EQ(f(constant(int64_t{90})).item<int64_t>(), 2880067194370816120);
}

Tensor halve_until_small(const Tensor& x) {
  return while_loop([](const std::vector<Tensor>& v) { return reduce_sum(v[0]) >= 1.f; },
                    [](const std::vector<Tensor>& v) { return v[0] * 0.5f; }, {x})[0];
}

TEST(WhileLoop, TensorLoopWithDataDependentCount) {
  auto f = function([](Tensor x) { return halve_until_small(x); });
  for (const Tensor& x : {constant({3.f, 5.f}), constant({0.25f, 0.5f}), constant({100.f, 28.f})}) {
    Tensor eager = halve_until_small(x);
    expect_near(f(x), eager);
    EXPECT_LT(reduce_sum(eager).item<float>(), 1.f);
  }
  EXPECT_EQ(f(constant({3.f, 5.f})).to_vector<float>(), (std::vector<float>{0.1875f, 0.3125f}));
}

TEST(WhileLoop, MaxIterationsStopsEarly) {
  auto loop = [](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& v) { return v[0] < 1000; },
                      [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1}; }, {x},
                      {.max_iterations = 5})[0];
  };
  auto f = function(loop);
  EXPECT_EQ(loop(constant(0)).item<int32_t>(), 5);
  EXPECT_EQ(f(constant(0)).item<int32_t>(), 5);
  EXPECT_EQ(f(constant(998)).item<int32_t>(), 1000);
}

TEST(WhileLoop, CondInsideTheBodyAndCapturedTensors) {
  // Halve large values, decrement small ones by `step`, until at most 1: the count and the
  // branch taken change from one iteration to the next.
  auto loop = [](const Tensor& x, const Tensor& step) {
    return while_loop(
        [](const std::vector<Tensor>& v) { return v[0] > 1.f; },
        [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
          return {cond(v[0] > 10.f, [&] { return v[0] * 0.5f; }, [&] { return v[0] - step; }), v[1] + 1};
        },
        {x, constant(0)});
  };
  auto f = function(loop);
  for (float x : {100.f, 7.f, 0.5f, 33.f}) {
    std::vector<Tensor> eager = loop(constant(x), constant(1.5f)), traced = f(constant(x), constant(1.5f));
    EXPECT_EQ(traced[0].item<float>(), eager[0].item<float>()) << x;
    EXPECT_EQ(traced[1].item<int32_t>(), eager[1].item<int32_t>()) << x;
  }
}

TEST(WhileLoop, BodyReturningTheWrongNumberOfVarsIsInvalidArgument) {
  auto cond_fn = [](const std::vector<Tensor>& v) { return v[0] < 3; };
  auto body = [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1}; };
  std::vector<Tensor> init{constant(0), constant(1.f)};
  EXPECT_THROW(while_loop(cond_fn, body, init), InvalidArgument);
  auto f = function([&](Tensor a, Tensor b) { return while_loop(cond_fn, body, {a, b}); });
  try {
    f(constant(0), constant(1.f));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[while_loop] body returns 1 values for 2 loop variables"), std::string::npos) << what;
    EXPECT_NE(what.find("control_flow_test.cpp"), std::string::npos) << what;
  }
}

TEST(WhileLoop, BodyChangingALoopVariablesDtypeOrShapeNamesIt) {
  auto cond_fn = [](const std::vector<Tensor>& v) { return v[0] < 3; };
  auto to_int = [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, cast(v[1], int32)}; };
  auto grow = [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, concat({v[1], v[1]}, 0)}; };
  for (const auto& body : {std::function<std::vector<Tensor>(const std::vector<Tensor>&)>(to_int),
                           std::function<std::vector<Tensor>(const std::vector<Tensor>&)>(grow)}) {
    std::vector<std::string> messages;
    try {
      while_loop(cond_fn, body, {constant(0), constant({1.f})});
    } catch (const InvalidArgument& e) {
      messages.push_back(e.what());
    }
    auto f = function([&](Tensor a, Tensor b) { return while_loop(cond_fn, body, {a, b}); });
    try {
      f(constant(0), constant({1.f}));
    } catch (const InvalidArgument& e) {
      messages.push_back(e.what());
    }
    ASSERT_EQ(messages.size(), 2u);
    for (const std::string& m : messages)
      EXPECT_NE(m.find("[while_loop] loop variable 1 enters the loop as float32 (1,) but the body returns"),
                std::string::npos)
          << m;
  }
}

TEST(WhileLoop, NonBoolConditionIsInvalidArgument) {
  auto cond_fn = [](const std::vector<Tensor>& v) { return v[0]; };
  auto body = [](const std::vector<Tensor>& v) { return v; };
  EXPECT_THROW(while_loop(cond_fn, body, {constant(1)}), InvalidArgument);
  auto f = function([&](Tensor a) { return while_loop(cond_fn, body, {a}); });
  EXPECT_THROW(f(constant(1)), InvalidArgument);
}

TEST(WhileLoop, VariableUpdatedInTheLoopIsReadAnewEachIteration) {
  Variable counter(constant(0.f), "counter");
  auto f = function([&](Tensor limit) {
    while_loop([&](const std::vector<Tensor>& v) { return counter.value() < limit; },
               [&](const std::vector<Tensor>& v) {
                 counter.assign_add(constant(1.f));
                 return v;
               },
               {limit});
    return counter.value();
  });
  EXPECT_EQ(f(constant(5.f)).item<float>(), 5.f);
  EXPECT_EQ(f(constant(7.f)).item<float>(), 7.f);
  EXPECT_EQ(counter.value().item<float>(), 7.f);
}

}  // namespace
}  // namespace weft
