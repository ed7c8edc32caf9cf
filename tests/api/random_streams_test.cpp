// Unseeded random ops in compiled graphs (weft issue 14, runtime/random_seed.h): compilation gives
// each one a key from the process's seed sequence, and every run of the node draws a new stream
// of it, counted by the node's own runs. So after set_seed the numbers repeat run to run, whatever
// order the parallel executor runs concurrent nodes in and whatever else draws from the sequence
// between calls; and every call still gives new numbers.
#include <gtest/gtest.h>

#include "api/control_flow.h"
#include "api/function.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/random.h"
#include "api/session.h"
#include "runtime/attr.h"
#include "runtime/random_seed.h"

namespace weft {
namespace {

using Values = std::vector<std::vector<float>>;

Values to_values(const std::vector<Tensor>& ts) {
  Values out;
  for (const Tensor& t : ts) out.push_back(t.to_vector<float>());
  return out;
}

// Two independent unseeded draws, big enough that the executor runs them on the inter-op pool
// side by side.
std::vector<Tensor> two_draws(const Tensor& x) {
  return {x + random::uniform({512, 512}), random::normal({512, 512}) - x};
}

// Three calls of a freshly traced two_draws after set_seed(seed); `between` runs between the
// calls (eager draws that move the process's sequence on).
std::vector<Values> three_calls(int64_t seed, const std::function<void()>& between) {
  random::set_seed(seed);
  auto f = function([](const Tensor& x) { return two_draws(x); });
  const Tensor x = zeros({512, 512});
  std::vector<Values> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(to_values(f(x)));
    between();
  }
  return calls;
}

TEST(RandomStreams, TracedUnseededDrawsRepeatAfterSetSeedAndDifferEveryCall) {
  const std::vector<Values> a = three_calls(42, [] {});
  // Eager unseeded draws between the calls take seeds from the sequence: before issue 14 they
  // changed what the next call drew; now a call's numbers depend on its node and run only.
  const std::vector<Values> b = three_calls(42, [] { (void)random::uniform({3}); });
  ASSERT_EQ(a.size(), 3u);
  for (size_t call = 0; call < a.size(); ++call) {
    ASSERT_EQ(a[call].size(), 2u);
    EXPECT_EQ(a[call], b[call]) << "call " << call;
    EXPECT_NE(a[call][0], a[call][1]) << "the two nodes share a stream, call " << call;
  }
  EXPECT_NE(a[0][0], a[1][0]);
  EXPECT_NE(a[1][0], a[2][0]);
  EXPECT_NE(a[0][1], a[1][1]);
  const std::vector<Values> c = three_calls(43, [] {});
  EXPECT_NE(a[0], c[0]) << "another global seed gives other numbers";
}

TEST(RandomStreams, AFunctionsFirstCallDrawsWhatTheSameOpsDrawEagerly) {
  random::set_seed(5);
  const Values eager = {random::uniform({6}).to_vector<float>(), random::normal({6}).to_vector<float>()};
  random::set_seed(5);
  auto f = function([](const Tensor& x) { return std::vector<Tensor>{x + random::uniform({6}), x + random::normal({6})}; });
  EXPECT_EQ(to_values(f(zeros({6}))), eager);
}

TEST(RandomStreams, SeededOpsInAGraphRepeatOnEveryCall) {
  auto f = function([](const Tensor& x) { return x + random::normal({8}, 0, 1, /*seed=*/3); });
  const Tensor x = zeros({8});
  const std::vector<float> first = f(x).to_vector<float>();
  EXPECT_EQ(f(x).to_vector<float>(), first);
  EXPECT_EQ(random::normal({8}, 0, 1, 3).to_vector<float>(), first);
}

TEST(RandomStreams, SessionRunsRepeatAfterSetSeedAcrossSessions) {
  Graph g;
  Tensor u, n;
  {
    GraphScope scope(g);
    u = random::uniform({256, 256});
    n = random::normal({256, 256});
  }
  auto runs = [&](int64_t seed) {
    random::set_seed(seed);
    Session sess(g);
    std::vector<Values> out;
    for (int i = 0; i < 2; ++i) out.push_back(to_values(sess.run({u, n})));
    return out;
  };
  const std::vector<Values> a = runs(7), b = runs(7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0][0], a[1][0]) << "a Session's unseeded op draws new numbers on every run";
  EXPECT_NE(a[0][0], a[0][1]);
}

TEST(RandomStreams, ADrawInALoopBodyDiffersPerIterationAndRepeatsAfterSetSeed) {
  // Loop variables (i, last, before_last): each iteration draws anew into `last`.
  auto loop = [](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& v) { return v[0] < 2.f; },
                      [](const std::vector<Tensor>& v) {
                        return std::vector<Tensor>{v[0] + 1.f, random::uniform({16}), v[1]};
                      },
                      {constant(0.f), x, x});
  };
  auto twice = [&](int64_t seed) {
    random::set_seed(seed);
    auto f = function([&](const Tensor& x) {
      std::vector<Tensor> r = loop(x);
      return std::vector<Tensor>{r[1], r[2]};
    });
    const Tensor x = zeros({16});
    std::vector<Values> out;
    for (int i = 0; i < 2; ++i) out.push_back(to_values(f(x)));
    return out;
  };
  const std::vector<Values> a = twice(11), b = twice(11);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0][0], a[0][1]) << "two iterations drew the same numbers";
  EXPECT_NE(a[0], a[1]) << "two calls drew the same numbers";
  EXPECT_NE(a[0][1], std::vector<float>(16, 0.f));
}

TEST(RandomStreams, KeyAndStreamOfEachKindOfDraw) {
  const RandomStream seeded = random_stream(Attrs{{"seed", int64_t{9}}, {"stream_seed", int64_t{4}}}, 6);
  EXPECT_EQ(seeded.key, 9u);
  EXPECT_EQ(seeded.stream, 0u) << "an explicit seed gives the same numbers on every run";
  const RandomStream compiled = random_stream(Attrs{{"seed", int64_t{-1}}, {"stream_seed", int64_t{4}}}, 6);
  EXPECT_EQ(compiled.key, 4u);
  EXPECT_EQ(compiled.stream, 6u);
  // A negative stream_seed (a hand-made graph file) is no stream seed: the process's sequence.
  set_global_seed(1);
  const RandomStream bad = random_stream(Attrs{{"seed", int64_t{-1}}, {"stream_seed", int64_t{-4}}}, 6);
  set_global_seed(1);
  EXPECT_EQ(bad.key, static_cast<uint64_t>(resolve_seed(-1)));
  EXPECT_EQ(bad.stream, 0u);
}

}  // namespace
}  // namespace weft
