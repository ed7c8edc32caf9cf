// The MPI stage of collectives between ranks (every rank runs these tests): MPI's own collectives
// issued in (step, instance) order whatever order the instances are started in, counts above the
// limit split into several calls, all-gather with uneven rows in member order, and an abandoned
// collective interrupting the transport until every rank resets it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

#include "comm/mpi_collectives.h"
#include "comm/mpi_progress_engine.h"
#include "world.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {
namespace {

using test_world::rank;
using test_world::size;

std::unique_ptr<MpiCollectives> make_transport(int64_t max_count) {
  MPI_Comm parent;  // one per transport, as cluster::init makes one; kept until exit
  MPI_Comm_dup(MPI_COMM_WORLD, &parent);
  std::vector<std::string> tasks;
  for (int r = 0; r < size(); ++r) tasks.push_back("/job:worker/replica:0/task:" + std::to_string(r));
  return std::make_unique<MpiCollectives>(parent, tasks, MpiCollectivesOptions{.max_count = max_count});
}

struct Started {
  std::shared_ptr<CrossProcessCollective> c;
  std::future<std::exception_ptr> done;
};

Started start(MpiCollectives& t, std::shared_ptr<CrossProcessCollective> c) {
  auto p = std::make_shared<std::promise<std::exception_ptr>>();
  Started s{c, p->get_future()};
  c->done = [p](std::exception_ptr e) { p->set_value(e); };
  t.start(c);
  return s;
}

// Waits (bounded: a hang is a failure, not a stuck test) for a collective's callback.
std::exception_ptr wait(Started& s) {
  if (s.done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "collective " << s.c->key.to_string() << " did not complete";
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  return s.done.get();
}

Tensor iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return Tensor::from_host(float32, {n}, v.data());
}

std::shared_ptr<CrossProcessCollective> all_reduce(Tensor send, int64_t step, int64_t instance, int64_t instances) {
  auto c = std::make_shared<CrossProcessCollective>();
  c->kind = CollectiveKind::kAllReduce;
  c->op = "collective_all_reduce";
  c->key = {1, step, instance, instances};
  c->send = send;
  c->result = Tensor::empty(send.dtype(), send.shape(), cpu_device());
  return c;
}

TEST(MpiCollectives, AllReduceSplitIntoSeveralCallsSumsEveryRank) {
  auto t = make_transport(/*max_count=*/3);
  const int p = size();
  Started s = start(*t, all_reduce(iota(10, static_cast<float>(rank())), 1, 0, 1));
  ASSERT_FALSE(wait(s));
  const std::vector<float> got = s.c->result.to_vector<float>();
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<float>(p * i + p * (p - 1) / 2)) << i;
}

TEST(MpiCollectives, InstancesStartedInAnyOrderAreIssuedInKeyOrder) {
  // Instance i has i + 1 elements: were two ranks to issue them in different orders, the sizes
  // would not match and MPI would fail or mix them up.
  auto t = make_transport(INT_MAX);
  const int p = size();
  constexpr int kInstances = 6;
  for (int64_t step = 1; step <= 5; ++step) {
    std::vector<int> order(kInstances);
    std::iota(order.begin(), order.end(), 0);
    if ((rank() + step) % 2) std::reverse(order.begin(), order.end());
    else std::rotate(order.begin(), order.begin() + (rank() + step) % kInstances, order.end());
    std::vector<Started> started(kInstances);
    for (int i : order) {
      started[static_cast<size_t>(i)] =
          start(*t, all_reduce(iota(i + 1, static_cast<float>(rank() * 10)), step, i, kInstances));
      std::this_thread::sleep_for(std::chrono::microseconds(100 * (rank() + 1)));
    }
    for (int i = 0; i < kInstances; ++i) {
      Started& s = started[static_cast<size_t>(i)];
      ASSERT_FALSE(wait(s)) << "step " << step << " instance " << i;
      const std::vector<float> got = s.c->result.to_vector<float>();
      ASSERT_EQ(got.size(), static_cast<size_t>(i + 1));
      for (int j = 0; j <= i; ++j) EXPECT_EQ(got[static_cast<size_t>(j)], static_cast<float>(10 * p * (p - 1) / 2 + p * j));
    }
  }
}

// Threads waiting for their steps drive the process's MPI progress engine in its thread's place
// (MpiProgressEngine::drive_until): two such drivers beside the engine's thread, over many
// instances started out of order, every result right, each callback once.
TEST(MpiCollectives, DriversBesideTheEngineThreadCompleteEveryInstanceOnce) {
  auto t = make_transport(/*max_count=*/5);
  const int p = size();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> drives{0};
  std::vector<std::thread> drivers;
  for (int k = 0; k < 2; ++k)
    drivers.emplace_back([&] {
      while (!stop) {
        MpiProgressEngine::process().drive_until([&] { return stop.load(); },
                                                 std::chrono::steady_clock::now() + std::chrono::microseconds(300));
        ++drives;
      }
    });
  constexpr int kInstances = 8;
  for (int64_t step = 1; step <= 20; ++step) {
    std::vector<Started> started(kInstances);
    for (int j = 0; j < kInstances; ++j) {
      const int i = (rank() + static_cast<int>(step) + j) % kInstances;
      started[static_cast<size_t>(i)] = start(*t, all_reduce(iota(3 * i + 1, static_cast<float>(rank())), step, i, kInstances));
    }
    for (int i = 0; i < kInstances; ++i) {
      Started& s = started[static_cast<size_t>(i)];
      ASSERT_FALSE(wait(s)) << "step " << step << " instance " << i;
      const std::vector<float> got = s.c->result.to_vector<float>();
      for (int j = 0; j <= 3 * i; ++j) EXPECT_EQ(got[static_cast<size_t>(j)], static_cast<float>(p * j + p * (p - 1) / 2));
    }
  }
  stop = true;
  for (std::thread& th : drivers) th.join();
  EXPECT_GT(drives.load(), 0);
}

TEST(MpiCollectives, BroadcastFromTheLastRankInSeveralCalls) {
  auto t = make_transport(/*max_count=*/4);
  auto c = std::make_shared<CrossProcessCollective>();
  c->kind = CollectiveKind::kBroadcast;
  c->op = "collective_broadcast";
  c->key = {2, 1, 0, 1};
  c->root_rank = size() - 1;
  c->result = rank() == c->root_rank ? iota(11, 5) : Tensor::empty(float32, {11}, cpu_device());
  c->send = c->result;
  Started s = start(*t, c);
  ASSERT_FALSE(wait(s));
  EXPECT_EQ(c->result.to_vector<float>(), iota(11, 5).to_vector<float>());
}

TEST(MpiCollectives, AllGatherOfUnevenRowsComesInMemberOrder) {
  // Two members per rank; member m lives on rank (p - 1 - m % p), so member order is not rank
  // order; member m has m % 3 rows of 2 elements, each row holding m.
  const int p = size();
  const int members = 2 * p;
  std::vector<int> member_ranks;
  for (int m = 0; m < members; ++m) member_ranks.push_back(p - 1 - m % p);
  for (int64_t max_count : {int64_t{INT_MAX}, int64_t{2 * p + 1}}) {
    auto t = make_transport(max_count);
    auto c = std::make_shared<CrossProcessCollective>();
    c->kind = CollectiveKind::kAllGather;
    c->op = "collective_all_gather";
    c->key = {3, 1, 0, 1};
    c->member_ranks = member_ranks;
    c->member_rows.assign(static_cast<size_t>(members), -1);
    std::vector<float> mine, expected;
    int64_t my_rows = 0;
    for (int m = 0; m < members; ++m) {
      const int rows = m % 3;
      for (int k = 0; k < 2 * rows; ++k) expected.push_back(static_cast<float>(m));
      if (member_ranks[static_cast<size_t>(m)] != rank()) continue;
      c->member_rows[static_cast<size_t>(m)] = rows;
      my_rows += rows;
      for (int k = 0; k < 2 * rows; ++k) mine.push_back(static_cast<float>(m));
    }
    c->send = Tensor::from_host(float32, {my_rows, 2}, mine.data());
    Started s = start(*t, c);
    ASSERT_FALSE(wait(s)) << max_count;
    EXPECT_EQ(c->result.to_vector<float>(), expected) << "max_count " << max_count;
  }
}

TEST(MpiCollectives, AllGatherWithDisagreeingRowSizesFailsOnEveryRank) {
  auto t = make_transport(INT_MAX);
  auto c = std::make_shared<CrossProcessCollective>();
  c->kind = CollectiveKind::kAllGather;
  c->op = "collective_all_gather";
  c->key = {3, 1, 0, 1};
  for (int r = 0; r < size(); ++r) c->member_ranks.push_back(r);
  c->member_rows.assign(static_cast<size_t>(size()), -1);
  c->member_rows[static_cast<size_t>(rank())] = 1;
  c->send = iota(rank() == 0 ? 3 : 2, 0).view({1, rank() == 0 ? 3 : 2});
  Started s = start(*t, c);
  std::exception_ptr e = wait(s);
  if (size() > 1) {
    ASSERT_TRUE(e);
    EXPECT_THROW(std::rethrow_exception(e), InvalidArgument);
  }
  // The order still holds: the next instance works.
  Started next = start(*t, all_reduce(iota(2, 1), 2, 0, 1));
  EXPECT_FALSE(wait(next));
}

TEST(MpiCollectives, AnAbandonedCollectiveInterruptsUntilEveryRankResets) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  auto t = make_transport(INT_MAX);
  if (rank() == 0) {
    // Only rank 0 joins step 1: its step is cancelled, the collective abandoned.
    Started lonely = start(*t, all_reduce(iota(4, 0), 1, 0, 1));
    EXPECT_EQ(lonely.done.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    t->abandon(lonely.c, std::make_exception_ptr(Unavailable("[step] cancelled")));
    Started later = start(*t, all_reduce(iota(4, 0), 2, 0, 1));
    std::exception_ptr e = wait(later);
    ASSERT_TRUE(e);
    try {
      std::rethrow_exception(e);
    } catch (const FailedPrecondition& f) {
      EXPECT_NE(std::string(f.what()).find("group 1"), std::string::npos) << f.what();
      EXPECT_NE(std::string(f.what()).find("interrupted"), std::string::npos) << f.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  t->reset(std::chrono::seconds(10));
  Started again = start(*t, all_reduce(iota(3, static_cast<float>(rank())), 3, 0, 1));
  ASSERT_FALSE(wait(again));
  const int p = size();
  EXPECT_EQ(again.c->result.to_vector<float>()[0], static_cast<float>(p * (p - 1) / 2));
}

}  // namespace
}  // namespace weft
