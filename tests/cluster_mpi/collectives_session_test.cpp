// Collective ops in graphs placed over a cluster (ctest runs 2 and 4 processes): TF1-style graphs
// with one member per task, run by the chief's Session. Results must be exact, whatever order the
// buckets of a step become ready in on each task; a kernel failing on one task must be raised on
// the chief (never a hang) and, after every task resets its collectives, the group works again.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/weft/weft.h"

namespace weft {
namespace {

Cluster* g_cluster = nullptr;

int tasks() { return g_cluster->num_tasks(); }
std::string cpu(int t) { return g_cluster->task_names()[static_cast<size_t>(t)] + "/device:CPU:0"; }

CollectiveGroup group(int64_t key, int64_t instances) {
  CollectiveGroup g{.key = key, .instances = instances};
  for (int t = 0; t < tasks(); ++t) g.members.push_back(cpu(t));
  return g;
}

Tensor scalar(float v) { return Tensor::from_host(float32, {}, &v); }

// Work that takes a while and adds nothing: makes a node ready late on one task only.
Tensor delayed(const Tensor& x, const Tensor& s, int rounds) {
  Tensor m = ones({48, 48}) * s * 0.01f;
  for (int i = 0; i < rounds; ++i) m = tanh(matmul(m, m));
  return x + reduce_sum(m) * 0.f;
}

TEST(ClusterCollectives, AllReduceSumAndMeanOfEveryTasksValueManyStepsInARow) {
  Graph g;
  Tensor s;
  std::vector<Tensor> sums, means;
  {
    GraphScope scope(g);
    s = placeholder(float32, {}, "s");
    for (int t = 0; t < tasks(); ++t) {
      DeviceScope on(cpu(t));
      const Tensor x = constant(std::vector<float>{1, 2, 3}, Shape{3}) * s * static_cast<float>(t + 1);
      sums.push_back(collective::all_reduce(x, group(1, 2), t, 0, "sum"));
      means.push_back(collective::all_reduce(x, group(1, 2), t, 1, "mean"));
    }
  }
  Session sess(g, *g_cluster);
  std::vector<TensorRef> fetches;
  for (const Tensor& t : sums) fetches.push_back(t);
  for (const Tensor& t : means) fetches.push_back(t);
  const float n = static_cast<float>(tasks());
  for (int step = 0; step < 25; ++step) {
    const float sv = static_cast<float>(step + 1);
    const auto out = sess.run({{s, scalar(sv)}}, fetches);
    const float total = sv * n * (n + 1) / 2;
    for (int t = 0; t < tasks(); ++t) {
      EXPECT_EQ(out[static_cast<size_t>(t)].to_vector<float>(), (std::vector<float>{total, 2 * total, 3 * total}))
          << "step " << step << " task " << t;
      EXPECT_EQ(out[static_cast<size_t>(tasks() + t)].to_vector<float>(),
                (std::vector<float>{total / n, 2 * total / n, 3 * total / n}))
          << "step " << step << " task " << t;
    }
  }
}

TEST(ClusterCollectives, BucketsReadyInDifferentOrdersOnEachTaskStillMatch) {
  // Three buckets of different sizes, several inputs each; on task t bucket t % 3 is made ready
  // late, so the tasks' executors reach the collectives in different orders.
  constexpr int kBuckets = 3;
  Graph g;
  Tensor s;
  std::vector<std::vector<Tensor>> outs(static_cast<size_t>(tasks()));
  {
    GraphScope scope(g);
    s = placeholder(float32, {}, "s");
    for (int t = 0; t < tasks(); ++t) {
      DeviceScope on(cpu(t));
      for (int b = 0; b < kBuckets; ++b) {
        std::vector<Tensor> bucket;
        for (int i = 0; i <= b; ++i) {
          Tensor x = ones({b + 2, i + 1}) * s * static_cast<float>(t + 1);
          if (b == t % kBuckets) x = delayed(x, s, 12);
          bucket.push_back(x);
        }
        for (const Tensor& y : collective::all_reduce(bucket, group(2, kBuckets), t, b)) outs[static_cast<size_t>(t)].push_back(y);
      }
    }
  }
  Session sess(g, *g_cluster);
  std::vector<TensorRef> fetches;
  for (const auto& task_outs : outs)
    for (const Tensor& y : task_outs) fetches.push_back(y);
  const float n = static_cast<float>(tasks());
  for (int step = 0; step < 10; ++step) {
    const float sv = static_cast<float>(step + 1);
    const auto got = sess.run({{s, scalar(sv)}}, fetches);
    for (const Tensor& y : got)
      for (float v : y.to_vector<float>()) ASSERT_EQ(v, sv * n * (n + 1) / 2) << "step " << step;
  }
}

TEST(ClusterCollectives, BroadcastAndAllGatherOfUnevenRows) {
  Graph g;
  Tensor s;
  std::vector<Tensor> bcast, gathered;
  const int root = tasks() - 1;
  {
    GraphScope scope(g);
    s = placeholder(float32, {}, "s");
    for (int t = 0; t < tasks(); ++t) {
      DeviceScope on(cpu(t));
      if (t == root) bcast.push_back(collective::broadcast_send(constant(std::vector<float>{1, 2}, Shape{2}) * s, group(3, 2), t, 0));
      else bcast.push_back(collective::broadcast_recv(float32, {2}, group(3, 2), t, root, 0));
      // Task t gives t + 1 rows of 2, each element t * s.
      gathered.push_back(collective::all_gather(ones({t + 1, 2}) * s * static_cast<float>(t), group(3, 2), t, 1));
    }
  }
  Session sess(g, *g_cluster);
  std::vector<TensorRef> fetches(bcast.begin(), bcast.end());
  fetches.insert(fetches.end(), gathered.begin(), gathered.end());
  for (float sv : {1.f, 3.f}) {
    const auto out = sess.run({{s, scalar(sv)}}, fetches);
    std::vector<float> expected;
    for (int t = 0; t < tasks(); ++t)
      for (int k = 0; k < 2 * (t + 1); ++k) expected.push_back(sv * static_cast<float>(t));
    for (int t = 0; t < tasks(); ++t) {
      EXPECT_EQ(out[static_cast<size_t>(t)].to_vector<float>(), (std::vector<float>{sv, 2 * sv}));
      const Tensor& all = out[static_cast<size_t>(tasks() + t)];
      EXPECT_EQ(all.shape(), (Shape{tasks() * (tasks() + 1) / 2, 2}));
      EXPECT_EQ(all.to_vector<float>(), expected) << "task " << t;
    }
  }
}

TEST(ClusterCollectives, AFailingKernelOnATaskIsRaisedAndAResetRestoresTheGroup) {
  Graph g;
  Tensor idx;
  std::vector<Tensor> sums;
  {
    GraphScope scope(g);
    idx = placeholder(int32, {1}, "idx");
    const Tensor table = constant(std::vector<float>{1, 2, 3, 4}, Shape{4});
    for (int t = 0; t < tasks(); ++t) {
      DeviceScope on(cpu(t));
      // Task 1's contribution goes through a gather that fails for a bad index.
      const Tensor x = t == 1 ? gather(table, idx) : constant(std::vector<float>{1}, Shape{1});
      sums.push_back(collective::all_reduce(x, group(4, 1), t, 0));
    }
  }
  Session sess(g, *g_cluster);
  const std::vector<TensorRef> fetches(sums.begin(), sums.end());
  const int32_t good = 3, bad = 9;
  const Tensor good_i = Tensor::from_host(int32, {1}, &good), bad_i = Tensor::from_host(int32, {1}, &bad);
  const float expected = static_cast<float>(tasks() - 1) + 4.f;
  EXPECT_EQ(sess.run({{idx, good_i}}, fetches)[0].to_vector<float>(), (std::vector<float>{expected}));
  try {
    (void)sess.run({{idx, bad_i}}, fetches);
    ADD_FAILURE() << "index 9 is out of range";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gather"), std::string::npos) << what;
    EXPECT_NE(what.find("task:1"), std::string::npos) << what;
  }
  // Whether the failed step left the group interrupted depends on timing (if the chief's
  // contribution reached MPI before task 1's error did, that instance was abandoned there: MPI
  // cannot cancel a collective). Either way the session resets every task's collectives before
  // its next step, and the steps that follow run, with no call of the user's.
  for (int step = 0; step < 3; ++step) {
    const auto out = sess.run({{idx, good_i}}, fetches);
    for (const Tensor& y : out) EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{expected})) << step;
  }
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::Cluster cluster = weft::cluster::init(argc, argv);  // the other tasks serve here
  weft::g_cluster = &cluster;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
