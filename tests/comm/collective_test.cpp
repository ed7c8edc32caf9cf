// Collectives within one process: one-member groups eagerly and traced (the same results), the
// ops' attribute checks, the local meeting of several members from threads (member order, not
// arrival order), cancellation, the order cursor of the MPI stage and the split of large counts.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "api/weft/weft.h"
#include "comm/collective_executor.h"
#include "comm/collective_order.h"
#include "comm/mpi_collectives.h"
#include "runtime/cancellation.h"
#include "runtime/flight_recorder.h"

namespace weft {
namespace {

const std::string kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";

CollectiveGroup one_member(int64_t key = 7) { return {.key = key, .members = {kCpu0}}; }

Tensor floats(std::vector<float> v, Shape s) { return Tensor::from_host(float32, s, v.data()); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(Collective, OneMemberAllReduceIsTheIdentityEagerAndTraced) {
  const Tensor a = floats({1, 2, 3, 4}, {2, 2});
  const Tensor b = floats({5, 6}, {2});
  const std::vector<Tensor> eager = collective::all_reduce(std::vector<Tensor>{a, b}, one_member(), 0);
  ASSERT_EQ(eager.size(), 2u);
  EXPECT_EQ(eager[0].to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(eager[0].shape(), a.shape());
  EXPECT_EQ(eager[1].to_vector<float>(), b.to_vector<float>());
  auto f = function([](const Tensor& x, const Tensor& y) {
    auto out = collective::all_reduce(std::vector<Tensor>{x, y}, one_member(), 0, 0, "mean");
    return out[0] * 2.f + reduce_sum(out[1]);
  });
  const std::vector<float> traced = f(a, b).to_vector<float>();
  const std::vector<float> expected = (a * 2.f + reduce_sum(b)).to_vector<float>();
  EXPECT_EQ(traced, expected);
  EXPECT_EQ(f(a, b).to_vector<float>(), expected);  // the compiled graph, a second time (step 2)
}

TEST(Collective, OneMemberBroadcastAndAllGatherEagerAndTraced) {
  const Tensor x = Tensor::from_host(int64, {3}, std::vector<int64_t>{4, 5, 6}.data());
  EXPECT_EQ(collective::broadcast_send(x, one_member(), 0).to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6}));
  const Tensor rows = floats({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(collective::all_gather(rows, one_member(), 0).shape(), (Shape{3, 2}));
  auto f = function([](const Tensor& r) { return collective::all_gather(r, one_member(9), 0) + 1.f; });
  EXPECT_EQ(f(rows).to_vector<float>(), (rows + 1.f).to_vector<float>());
  auto g = function([](const Tensor& v) { return collective::broadcast_send(v, one_member(10), 0) * int64_t{2}; });
  EXPECT_EQ(g(x).to_vector<int64_t>(), (std::vector<int64_t>{8, 10, 12}));
}

TEST(Collective, AttributesAreCheckedNamingTheOp) {
  const Tensor a = floats({1, 2}, {2});
  CollectiveGroup g = one_member();
  std::string e = error_of([&] { collective::all_reduce(a, g, 1); });
  EXPECT_NE(e.find("[collective_all_reduce]"), std::string::npos) << e;
  EXPECT_NE(e.find("member 1"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, g, 0, /*instance=*/1); });
  EXPECT_NE(e.find("instance_key 1"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, g, 0, 0, "max"); });
  EXPECT_NE(e.find("reduction"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, {.key = 1, .members = {kCpu0, ""}}, 0); });
  EXPECT_NE(e.find("empty name"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, {.key = 1, .members = {kCpu0, kCpu0}}, 0); });
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, {.key = 1, .members = {}}, 0); });
  EXPECT_NE(e.find("group_members is empty"), std::string::npos) << e;
  e = error_of([&] { collective::all_reduce(a, {.key = 1, .members = {kCpu0}, .instances = 0}, 0); });
  EXPECT_NE(e.find("group_instances"), std::string::npos) << e;
  e = error_of([&] { collective::broadcast_recv(float32, {2}, g, 0, /*root=*/3); });
  EXPECT_NE(e.find("root 3"), std::string::npos) << e;
  e = error_of([&] { collective::all_gather(floats({1}, Shape{}), g, 0); });
  EXPECT_NE(e.find("rank >= 1"), std::string::npos) << e;
  const Tensor h = Tensor::from_host(bool_, {1}, std::vector<uint8_t>{1}.data());
  e = error_of([&] { collective::all_reduce(h, g, 0); });
  EXPECT_NE(e.find("float32, float64, int32 or int64"), std::string::npos) << e;
  // In a graph, the node is refused when it is made.
  Graph graph;
  GraphScope scope(graph);
  const Tensor p = placeholder(float32, {2}, "p");
  e = error_of([&] { collective::all_reduce(p, g, 0, 5); });
  EXPECT_NE(e.find("instance_key 5"), std::string::npos) << e;
}

// Several members of one process meet through the executor from threads, as the logical CPUs'
// partitions do; the sum is taken in member order whichever member arrives first.
struct Result {
  std::exception_ptr error;
  std::vector<Tensor> outputs;
};

std::vector<Result> run_members(CollectiveExecutor& ex, CollectiveParams p, int64_t step,
                                const std::vector<std::vector<Tensor>>& inputs, std::vector<int> arrival_order,
                                CancellationManager* cm = nullptr) {
  std::vector<std::promise<Result>> promises(inputs.size());
  std::vector<std::thread> threads;
  for (int m : arrival_order) {
    CollectiveParams mine = p;
    mine.member = m;
    ex.run_async(mine, step, inputs[static_cast<size_t>(m)], cm,
                 [&promises, m](std::exception_ptr e, std::vector<Tensor> outs) {
                   promises[static_cast<size_t>(m)].set_value({e, std::move(outs)});
                 });
  }
  std::vector<Result> out;
  for (auto& pr : promises) out.push_back(pr.get_future().get());
  return out;
}

CollectiveParams params(CollectiveKind kind, int members, const std::string& op) {
  CollectiveParams p;
  p.kind = kind;
  p.op = op;
  p.group_key = 3;
  for (int i = 0; i < members; ++i) p.members.push_back("/cpu:" + std::to_string(i));
  return p;
}

TEST(Collective, LocalMembersSumInMemberOrderWhateverTheArrivalOrder) {
  CollectiveExecutor ex;
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 + ... .
  const std::vector<std::vector<Tensor>> in = {{floats({1e8f, 1}, {2})}, {floats({1, 2}, {2})},
                                               {floats({-1e8f, 3}, {2})}, {floats({1, 4}, {2})}};
  CollectiveParams p = params(CollectiveKind::kAllReduce, 4, "collective_all_reduce");
  const std::vector<float> expected = {((1e8f + 1.f) + -1e8f) + 1.f, 10.f};
  int64_t step = 1;
  for (std::vector<int> order : {std::vector<int>{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}}) {
    const auto results = run_members(ex, p, step++, in, order);
    for (const Result& r : results) {
      ASSERT_FALSE(r.error);
      EXPECT_EQ(r.outputs[0].to_vector<float>(), expected);
    }
  }
  p.reduction = CollectiveReduction::kMean;
  const auto mean = run_members(ex, p, step++, in, {1, 0, 3, 2});
  EXPECT_EQ(mean[2].outputs[0].to_vector<float>(), (std::vector<float>{expected[0] / 4, 2.5f}));
}

TEST(Collective, LocalMembersBroadcastAndGatherInMemberOrder) {
  CollectiveExecutor ex;
  CollectiveParams b = params(CollectiveKind::kBroadcast, 3, "collective_broadcast");
  b.root = 1;
  b.dtype = DType::Int32;
  b.shape = Shape{2};
  const Tensor v = Tensor::from_host(int32, {2}, std::vector<int32_t>{7, 8}.data());
  auto got = run_members(ex, b, 1, {{}, {v}, {}}, {2, 0, 1});
  for (const Result& r : got) {
    ASSERT_FALSE(r.error);
    EXPECT_EQ(r.outputs[0].to_vector<int32_t>(), (std::vector<int32_t>{7, 8}));
  }
  CollectiveParams g = params(CollectiveKind::kAllGather, 3, "collective_all_gather");
  auto rows = run_members(ex, g, 1, {{floats({1, 2}, {1, 2})}, {floats({}, {0, 2})}, {floats({3, 4, 5, 6}, {2, 2})}},
                          {2, 1, 0});
  for (const Result& r : rows) {
    ASSERT_FALSE(r.error);
    EXPECT_EQ(r.outputs[0].shape(), (Shape{3, 2}));
    EXPECT_EQ(r.outputs[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(Collective, MembersThatDisagreeFailEveryMemberNamingTheOp) {
  CollectiveExecutor ex;
  auto sizes = run_members(ex, params(CollectiveKind::kAllReduce, 2, "collective_all_reduce"), 1,
                           {{floats({1, 2}, {2})}, {floats({1, 2, 3}, {3})}}, {0, 1});
  for (const Result& r : sizes) {
    ASSERT_TRUE(r.error);
    EXPECT_THROW(std::rethrow_exception(r.error), InvalidArgument);
    try {
      std::rethrow_exception(r.error);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("[collective_all_reduce] input 0 of member 1"), std::string::npos) << e.what();
    }
  }
  auto dims = run_members(ex, params(CollectiveKind::kAllGather, 2, "collective_all_gather"), 1,
                          {{floats({1, 2}, {1, 2})}, {floats({1, 2, 3}, {1, 3})}}, {1, 0});
  for (const Result& r : dims) EXPECT_TRUE(r.error);
  CollectiveParams b = params(CollectiveKind::kBroadcast, 2, "collective_broadcast");
  b.dtype = DType::Float32;
  b.shape = Shape{3};
  auto shape = run_members(ex, b, 1, {{floats({1, 2}, {2})}, {}}, {0, 1});
  for (const Result& r : shape) EXPECT_TRUE(r.error);
}

TEST(Collective, CancellingAStepFailsItsPendingCollectiveAtOnce) {
  CollectiveExecutor ex;
  CancellationManager cm;
  CollectiveParams p = params(CollectiveKind::kAllReduce, 2, "collective_all_reduce");
  std::promise<std::exception_ptr> got;
  ex.run_async(p, 1, {floats({1}, {1})}, &cm, [&](std::exception_ptr e, std::vector<Tensor>) { got.set_value(e); });
  cm.cancel(std::make_exception_ptr(Unavailable("[step] task 3 was lost")));
  std::exception_ptr e = got.get_future().get();
  ASSERT_TRUE(e);
  EXPECT_THROW(std::rethrow_exception(e), Unavailable);
  // The group still works for the next step (nothing crossed a process).
  const auto ok = run_members(ex, p, 2, {{floats({1}, {1})}, {floats({2}, {1})}}, {1, 0});
  EXPECT_FALSE(ok[0].error);
  EXPECT_EQ(ok[0].outputs[0].to_vector<float>(), (std::vector<float>{3}));
}

// The newest flight recorder entries of `group`, oldest first.
std::vector<FlightEntry> flight_entries_of(int64_t group) {
  std::vector<FlightEntry> out;
  for (const FlightEntry& e : process_flight_recorder().snapshot())
    if (e.group == group) out.push_back(e);
  return out;
}

// One flight recorder entry per instance (not per member): done when it completed, cancelled when
// its step was.
TEST(Collective, EachInstanceIsOneFlightRecorderEntry) {
  CollectiveExecutor ex;
  CollectiveParams p = params(CollectiveKind::kAllReduce, 2, "collective_all_reduce");
  p.group_key = 4242;
  const auto ok = run_members(ex, p, 5, {{floats({1, 2}, {2})}, {floats({3, 4}, {2})}}, {1, 0});
  ASSERT_FALSE(ok[0].error);
  std::vector<FlightEntry> entries = flight_entries_of(4242);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_STREQ(entries[0].kind, "all-reduce");
  EXPECT_EQ(entries[0].step, 5);
  EXPECT_EQ(entries[0].bytes, 8u);  // the first arrival's inputs
  EXPECT_EQ(entries[0].peer, -1);
  EXPECT_EQ(entries[0].state, FlightState::kDone);
  EXPECT_GE(entries[0].end_us, entries[0].start_us);

  CancellationManager cm;
  std::promise<std::exception_ptr> got;
  ex.run_async(p, 6, {floats({1, 2}, {2})}, &cm, [&](std::exception_ptr e, std::vector<Tensor>) { got.set_value(e); });
  entries = flight_entries_of(4242);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].state, FlightState::kPending);  // the other member has not come
  cm.cancel(std::make_exception_ptr(Unavailable("[step] task 3 was lost")));
  ASSERT_TRUE(got.get_future().get());
  entries = flight_entries_of(4242);
  EXPECT_EQ(entries[1].step, 6);
  EXPECT_EQ(entries[1].state, FlightState::kCancelled);
}

TEST(Collective, AGroupAcrossProcessesNeedsACluster) {
  CollectiveExecutor ex;
  CollectiveParams p = params(CollectiveKind::kAllReduce, 2, "collective_all_reduce");
  p.members = {kCpu0, "/job:worker/replica:0/task:1/device:CPU:0"};
  std::promise<std::exception_ptr> got;
  ex.run_async(p, 1, {floats({1}, {1})}, nullptr, [&](std::exception_ptr e, std::vector<Tensor>) { got.set_value(e); });
  std::exception_ptr e = got.get_future().get();
  ASSERT_TRUE(e);
  try {
    std::rethrow_exception(e);
  } catch (const FailedPrecondition& f) {
    EXPECT_NE(std::string(f.what()).find("cluster::init"), std::string::npos) << f.what();
  }
}

TEST(CollectiveOrder, IssuesInStepThenInstanceOrder) {
  CollectiveOrder order;
  const auto key = [](int64_t step, int64_t instance, int64_t group = 1) {
    return CollectiveInstanceKey{group, step, instance, 3};
  };
  EXPECT_TRUE(order.is_next(key(5, 0)));
  EXPECT_FALSE(order.is_next(key(5, 1)));
  order.advance(key(5, 0));
  EXPECT_FALSE(order.is_next(key(5, 2)));
  EXPECT_TRUE(order.is_next(key(5, 1)));
  EXPECT_FALSE(order.is_next(key(6, 0)));  // step 5 is not over
  EXPECT_THROW(order.check(key(6, 0)), FailedPrecondition);  // ... and never will be: it failed here
  EXPECT_THROW(order.check(key(5, 1, /*group=*/2)), FailedPrecondition);  // one cross-process group a step
  order.advance(key(5, 1));
  order.advance(key(5, 2));
  EXPECT_THROW(order.check(key(5, 0)), FailedPrecondition);  // already issued
  EXPECT_THROW(order.check(key(4, 0)), FailedPrecondition);  // a past step
  EXPECT_NO_THROW(order.check(key(9, 0)));  // a later step, once the last is complete
}

TEST(CollectiveOrder, ANewStepMayStartOnceTheLastIsComplete) {
  CollectiveOrder order;
  for (int64_t i = 0; i < 2; ++i) order.advance({1, 5, i, 2});
  EXPECT_NO_THROW(order.check({1, 6, 1, 2}));
  EXPECT_FALSE(order.is_next({1, 6, 1, 2}));
  EXPECT_TRUE(order.is_next({1, 6, 0, 2}));
  EXPECT_TRUE(order.is_next({2, 8, 0, 2}));  // a later step may be another group's
  EXPECT_THROW(order.check({1, 6, 2, 2}), InvalidArgument);  // instance out of range
  order.reset();
  EXPECT_TRUE(order.is_next({1, 1, 0, 2}));
}

TEST(MpiCollectives, LargeCountsAreSplitIntoPiecesOfTheLimit) {
  EXPECT_TRUE(split_counts(0, 4).empty());
  EXPECT_EQ(split_counts(10, 4), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(split_counts(8, 4), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 4}}));
  const int64_t big = (int64_t{1} << 32) + 5;
  const auto pieces = split_counts(big, INT_MAX);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces.back().first + pieces.back().second, big);
  EXPECT_THROW(split_counts(5, 0), InvalidArgument);
}

}  // namespace
}  // namespace weft
