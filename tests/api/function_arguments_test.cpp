// weft::function's arguments: containers of tensors are fed, not baked into the trace, and every
// other argument is keyed by its exact value and type.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/devices.h"
#include "api/function.h"
#include "api/graph.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/session.h"
#include "temp_dir.h"

namespace weft {
namespace {

float scalar(const Tensor& t) { return t.item<float>(); }

TEST(FunctionArguments, AVectorOfTensorsIsFedOnEveryCall) {
  auto f = function([](const std::vector<Tensor>& xs) { return xs[0] + xs[1]; });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(scalar(f(std::vector<Tensor>{constant(4.f + i), constant(6.f)})), 10.f + i);
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(FunctionArguments, ArraysPairsTuplesAndTheirNestingsAreFed) {
  auto array = function([](std::array<Tensor, 2> a) { return a[0] * a[1]; });
  auto pair = function([](const std::pair<Tensor, float>& p) { return p.first * p.second; });
  auto tuple = function([](const std::tuple<Tensor, int, std::vector<Tensor>>& t) {
    return std::get<0>(t) * static_cast<float>(std::get<1>(t)) + std::get<2>(t).at(0) - std::get<2>(t).at(1);
  });
  auto pairs = function([](const std::vector<std::pair<Tensor, Tensor>>& ps) {
    Tensor total = constant(0.f);
    for (const auto& [a, b] : ps) total = total + a * b;
    return total;
  });
  auto arrays_of_vectors = function([](const std::array<std::vector<Tensor>, 2>& a) { return a[0][0] - a[1][1]; });
  for (int i = 0; i < 3; ++i) {
    const float v = static_cast<float>(i);
    EXPECT_EQ(scalar(array(std::array<Tensor, 2>{constant(v), constant(3.f)})), 3.f * v);
    EXPECT_EQ(scalar(pair(std::pair<Tensor, float>{constant(v), 2.f})), 2.f * v);
    EXPECT_EQ(scalar(tuple(std::tuple<Tensor, int, std::vector<Tensor>>{constant(v), 10, {constant(v), constant(1.f)}})),
              11.f * v - 1.f);
    EXPECT_EQ(scalar(pairs(std::vector<std::pair<Tensor, Tensor>>{{constant(v), constant(2.f)}, {constant(1.f), constant(v)}})),
              3.f * v);
    EXPECT_EQ(scalar(arrays_of_vectors(std::array<std::vector<Tensor>, 2>{
                  std::vector<Tensor>{constant(v)}, std::vector<Tensor>{constant(0.f), constant(5.f)}})),
              v - 5.f);
  }
  EXPECT_EQ(array.tracing_count(), 1);
  EXPECT_EQ(pair.tracing_count(), 1);
  EXPECT_EQ(tuple.tracing_count(), 1);
  EXPECT_EQ(pairs.tracing_count(), 1);
  EXPECT_EQ(arrays_of_vectors.tracing_count(), 1);
  // The non-tensor half of a pair is part of the signature.
  EXPECT_EQ(scalar(pair(std::pair<Tensor, float>{constant(1.f), 5.f})), 5.f);
  EXPECT_EQ(pair.tracing_count(), 2);
}

TEST(FunctionArguments, TiesOfTensorsAndOptionalsAreFed) {
  auto tied = function([](std::tuple<Tensor, Tensor> t) { return std::get<0>(t) - std::get<1>(t); });
  auto maybe = function([](const std::optional<Tensor>& t) { return t ? *t * 2.f : constant(-1.f); });
  for (int i = 0; i < 3; ++i) {
    Tensor a = constant(static_cast<float>(i)), b = constant(1.f);
    EXPECT_EQ(scalar(tied(std::tie(a, b))), i - 1.f);
    EXPECT_EQ(scalar(maybe(std::optional<Tensor>(a))), 2.f * i);
  }
  EXPECT_EQ(scalar(maybe(std::optional<Tensor>())), -1.f);
  EXPECT_EQ(tied.tracing_count(), 1);
  EXPECT_EQ(maybe.tracing_count(), 2);
}

TEST(FunctionArguments, AnotherVectorLengthRetraces) {
  auto sum = function([](const std::vector<Tensor>& xs) {
    Tensor total = constant(0.f);
    for (const Tensor& x : xs) total = total + x;
    return total;
  });
  EXPECT_EQ(scalar(sum(std::vector<Tensor>{constant(1.f), constant(2.f)})), 3.f);
  EXPECT_EQ(scalar(sum(std::vector<Tensor>{constant(1.f), constant(2.f), constant(3.f)})), 6.f);
  EXPECT_EQ(scalar(sum(std::vector<Tensor>{constant(5.f), constant(5.f)})), 10.f);
  EXPECT_EQ(scalar(sum(std::vector<Tensor>{})), 0.f);
  EXPECT_EQ(sum.tracing_count(), 3);
}

TEST(FunctionArguments, VariablesInAContainerAreKeyedByIdentity) {
  Variable a(constant(1.f), "a"), b(constant(2.f), "b");
  auto f = function([](const std::vector<Variable>& vs) { return vs.at(0) * 10.f; });
  EXPECT_EQ(scalar(f(std::vector<Variable>{a})), 10.f);
  EXPECT_EQ(scalar(f(std::vector<Variable>{b})), 20.f);
  a.assign(constant(3.f));
  EXPECT_EQ(scalar(f(std::vector<Variable>{a})), 30.f);  // read on each call, not baked in
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(FunctionArguments, AFloatIsKeyedByItsExactValue) {
  auto f = function([](Tensor x, float scale) { return x * scale; });
  Tensor x = constant(1.f);
  EXPECT_EQ(scalar(f(x, 1.0f)), 1.0f);
  EXPECT_EQ(scalar(f(x, 1.000001f)), 1.000001f);
  EXPECT_EQ(f.tracing_count(), 2);
  auto g = function([](Tensor x, double offset) { return x + static_cast<float>(offset * 1e9); });
  EXPECT_EQ(scalar(g(x, 0.1)), 1.f + 1e8f);
  EXPECT_EQ(scalar(g(x, 0.1000000000001)), 1.f + static_cast<float>(0.1000000000001 * 1e9));
  EXPECT_EQ(g.tracing_count(), 2);
}

TEST(FunctionArguments, NegativeZeroIsNotZeroAndNaNDoesNotRetrace) {
  auto f = function([](Tensor x, float z) { return x / z; });
  Tensor one = constant(1.f);
  EXPECT_EQ(scalar(f(one, 0.0f)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(scalar(f(one, -0.0f)), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f.tracing_count(), 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(scalar(f(one, std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(scalar(f(one, -std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f.tracing_count(), 3);
}

TEST(FunctionArguments, NumbersOfDifferentTypesDoNotShareATrace) {
  auto f = function([](Tensor x, auto s) {
    using S = decltype(s);
    if constexpr (std::is_same_v<S, bool>) return x + 1.f;
    else if constexpr (std::is_same_v<S, int>) return x + 2.f;
    else if constexpr (std::is_same_v<S, long>) return x + 3.f;
    else if constexpr (std::is_same_v<S, unsigned>) return x + 4.f;
    else if constexpr (std::is_same_v<S, float>) return x + 5.f;
    else return x + 6.f;
  });
  Tensor x = constant(0.f);
  EXPECT_EQ(scalar(f(x, 1)), 2.f);
  EXPECT_EQ(scalar(f(x, 1.0)), 6.f);
  EXPECT_EQ(scalar(f(x, true)), 1.f);
  EXPECT_EQ(scalar(f(x, 1L)), 3.f);
  EXPECT_EQ(scalar(f(x, 1u)), 4.f);
  EXPECT_EQ(scalar(f(x, 1.0f)), 5.f);
  EXPECT_EQ(f.tracing_count(), 6);
}

TEST(FunctionArguments, TensorPositionsArePartOfTheSignature) {
  auto f = function([](auto a, auto b) { return a - b; });
  Tensor x = constant(5.f);
  EXPECT_EQ(scalar(f(x, 2.f)), 3.f);
  EXPECT_EQ(scalar(f(2.f, x)), -3.f);
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(FunctionArguments, StringsAreKeyedUnambiguously) {
  // As many traces as different lists of strings, whatever the strings hold.
  auto f = function([](Tensor x, const auto&... parts) { return x + static_cast<float>(sizeof...(parts)); });
  Tensor x = constant(0.f);
  EXPECT_EQ(scalar(f(x, std::string("a', 'b"))), 1.f);
  EXPECT_EQ(scalar(f(x, std::string("a"), std::string("b"))), 2.f);
  EXPECT_EQ(scalar(f(x, std::string("a\", \"b"))), 1.f);
  EXPECT_EQ(scalar(f(x, std::string("a, b"))), 1.f);
  EXPECT_EQ(f.tracing_count(), 4);
  auto g = function([](Tensor x, const std::string& op) { return op == "double" ? x * 2.f : x + 1.f; });
  EXPECT_EQ(scalar(g(x, "double")), 0.f);
  EXPECT_EQ(scalar(g(x, std::string("add one"))), 1.f);
  EXPECT_EQ(scalar(g(x, std::string("double"))), 0.f);
  EXPECT_EQ(g.tracing_count(), 2);
}

TEST(FunctionArguments, RetracingWarningShowsValuesExactly) {
  auto f = function([](Tensor x, float scale) { return x * scale; });
  ::testing::internal::CaptureStderr();
  for (float s : {1.f, 1.000001f, 1.000002f, 1.000003f, 1.000004f}) f(constant(1.f), s);
  std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("from (Tensor, 1.000003f) to (Tensor, 1.000004f)"), std::string::npos) << warned;
}

// A retrace for another device says so, naming both.
TEST(FunctionArguments, RetracingWarningNamesTheDevices) {
  auto f = function([](Tensor x) { return x + 1.f; });
  const Tensor x = constant(1.f);
  ::testing::internal::CaptureStderr();
  // Five spellings of one device: five keys, five traces.
  for (const char* device : {"/cpu:0", "/device:CPU:0", "/job:localhost/device:CPU:0", "/task:0/device:CPU:0",
                             "/job:localhost/replica:0/task:0/device:CPU:0"}) {
    DeviceScope on(device);
    f(x);
  }
  std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(f.tracing_count(), 5);
  EXPECT_NE(warned.find("it was called for another device ('/task:0/device:CPU:0', then "), std::string::npos) << warned;
}

}  // namespace
}  // namespace weft

// A type of the user's own, keyed through weft::SignatureKey.
namespace user {
struct Activation {
  std::string name;
  float slope = 0.f;
};
struct Opaque {
  int state = 0;
};
}  // namespace user

template <>
struct weft::SignatureKey<user::Activation> {
  static std::string key(const user::Activation& a) { return a.name + "/" + std::to_string(a.slope); }
};

namespace weft {
namespace {

static_assert(is_keyable_v<Tensor> && is_keyable_v<const Tensor&> && is_keyable_v<Variable>);
static_assert(is_keyable_v<float> && is_keyable_v<std::string> && is_keyable_v<const char*> && is_keyable_v<DType>);
static_assert(is_keyable_v<std::vector<Tensor>> && is_keyable_v<std::tuple<Tensor, int, std::vector<std::string>>>);
static_assert(is_keyable_v<user::Activation> && is_keyable_v<std::pair<Tensor, user::Activation>>);
static_assert(!is_keyable_v<user::Opaque>);
static_assert(!is_keyable_v<std::vector<user::Opaque>>);
static_assert(!is_keyable_v<std::tuple<Tensor, user::Opaque>>);
static_assert(!is_keyable_v<user::Opaque*>);

TEST(FunctionArguments, ATypeOfOnesOwnIsKeyedThroughSignatureKey) {
  int traced = 0;
  auto f = function([&](Tensor x, const user::Activation& act) {
    ++traced;
    return act.name == "leaky" ? maximum(x, x * act.slope) : x;
  });
  Tensor x = constant({-10.f, 10.f});
  for (int i = 0; i < 3; ++i) {
    user::Activation fresh{"leaky", 0.5f};  // another object each time, equal keys
    EXPECT_EQ(f(x, fresh).to_vector<float>(), (std::vector<float>{-5.f, 10.f}));
  }
  EXPECT_EQ(f(x, user::Activation{"leaky", 0.25f}).to_vector<float>(), (std::vector<float>{-2.5f, 10.f}));
  EXPECT_EQ(f(x, user::Activation{"linear", 0.5f}).to_vector<float>(), (std::vector<float>{-10.f, 10.f}));
  EXPECT_EQ(traced, 3);
  auto g = function([](const std::pair<Tensor, user::Activation>& p) { return p.first * p.second.slope; });
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(scalar(g(std::pair<Tensor, user::Activation>{constant(static_cast<float>(i)), {"s", 2.f}})), 2.f * i);
  EXPECT_EQ(g.tracing_count(), 1);
}

TEST(FunctionArguments, GraphAndSaveTakeContainers) {
  auto f = function([](const std::vector<Tensor>& xs, float scale) { return (xs.at(0) - xs.at(1)) * scale; });
  std::vector<Tensor> xs{constant({5.f, 7.f}), constant({1.f, 2.f})};
  Graph g = f.graph(xs, 2.f);
  int placeholders = 0;
  for (const Operation& op : g.operations()) placeholders += op.type() == "Placeholder";
  EXPECT_EQ(placeholders, 2);  // the vector's tensors are inputs, not constants
  EXPECT_EQ(g.tensor("input_1:0").shape(), (Shape{2}));
  testing::TempDir dir("function_arguments");
  f.save(dir.path(), xs, 2.f);
  auto loaded = Session(Graph::load(dir.path()))
                    .run({{"input_0:0", constant({9.f, 9.f})}, {"input_1:0", constant({4.f, 5.f})}}, {"output_0:0"});
  EXPECT_EQ(loaded.at(0).to_vector<float>(), (std::vector<float>{10.f, 8.f}));
  EXPECT_EQ(f.tracing_count(), 1);
}

}  // namespace
}  // namespace weft
