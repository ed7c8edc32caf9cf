// A cluster under mpirun (ctest starts 3 ranks): task 0 runs these tests, the other tasks serve
// it inside cluster::init. Graphs placed over the tasks must give what one process gives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "api/weft/weft.h"
#include "cluster/cluster_runtime.h"
#include "runtime/device.h"
#include "scheduler/step_rendezvous.h"
#include "runtime/op_registry.h"
#include "cluster_mpi/test_sleep_op.h"
#include "runtime/shard_split.h"

namespace weft {
namespace {

Cluster* g_cluster = nullptr;

std::string worker(int task) { return "/job:worker/task:" + std::to_string(task); }

TEST(Cluster, KnowsEveryTaskAndItsDevices) {
  ASSERT_GE(g_cluster->num_tasks(), 3);
  EXPECT_TRUE(g_cluster->is_chief());
  const auto names = g_cluster->task_names();
  EXPECT_EQ(names[0], "/job:worker/replica:0/task:0");
  EXPECT_EQ(names[2], "/job:worker/replica:0/task:2");
  std::set<std::string> devices;
  for (const DeviceInfo& d : g_cluster->devices()) devices.insert(d.name);
  for (int t = 0; t < g_cluster->num_tasks(); ++t)
    EXPECT_TRUE(devices.contains("/job:worker/replica:0/task:" + std::to_string(t) + "/device:CPU:0")) << t;
  EXPECT_EQ(list_devices().size(), g_cluster->devices().size());
}

// The tasks mpirun starts on one machine share its cores instead of each sizing its pools to
// all of them (runtime/device.h, cores_for_this_process).
TEST(Cluster, TasksOnOneHostShareItsCores) {
  if (std::getenv("WEFT_NUM_THREADS")) GTEST_SKIP() << "WEFT_NUM_THREADS sets the threads by hand";
  // Tasks on one host by the launcher's count (the simulated-hosts run puts one per "host").
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ASSERT_NE(local, nullptr) << "run under Open MPI's mpirun";
  const HostTopology& host = host_topology();
  const int share = std::max(1, host.physical_cores / std::max(1, std::atoi(local)));
  for (const DeviceInfo& d : g_cluster->devices()) {
    if (d.type != "CPU") continue;
    EXPECT_GE(d.cores, 1) << d.name;
    EXPECT_LE(d.cores, share) << d.name << ": " << d.description;
  }
}

// Run by the cluster_mpi.spec_gpus test (a spec giving the chief GPUs [1, 0] of the 4,5,6 it was
// started with): the chief's CUDA runtime sees what the spec gives, in its order.
TEST(Cluster, TheChiefSeesTheGpusItsSpecGives) {
  const char* expected = std::getenv("WEFT_TEST_EXPECT_VISIBLE");
  if (!expected) GTEST_SKIP() << "run by the cluster_mpi.spec_gpus test";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  ASSERT_NE(visible, nullptr);
  EXPECT_STREQ(visible, expected);
}

// A two-layer model with layer 1 on task 1 and layer 2 on task 2, trained TF1-style. Its
// initial values are unseeded, and each layer adds unseeded noise to its weights on every step:
// the keys of those draws come from the chief's seed sequence when the graph is compiled, and
// each run of a node draws the next stream of its key on the task that runs it (weft issue 14,
// runtime/random_seed.h), so after the same set_seed the cluster draws what one process draws.
struct Model {
  Graph g;
  Tensor x, y, loss, noise1, noise2;
  Operation train;
  std::shared_ptr<optim::SGD> sgd = std::make_shared<optim::SGD>(0.1);
};

Model build_model(bool spread) {
  Model m;
  GraphScope scope(m.g);
  m.x = placeholder(float32, {-1, 8}, "x");
  m.y = placeholder(float32, {-1, 4}, "y");
  std::vector<Variable> vars;
  Tensor h, out;
  {
    DeviceScope on(spread ? worker(1) : "/cpu:0");
    vars.emplace_back(random::uniform({8, 16}, -0.5, 0.5), "w1");
    vars.emplace_back(zeros({16}), "b1");
  }
  {
    DeviceScope on(spread ? worker(2) : "/cpu:0");
    vars.emplace_back(random::uniform({16, 4}, -0.5, 0.5), "w2");
    vars.emplace_back(zeros({4}), "b2");
  }
  GradientTape tape;
  {
    DeviceScope on(spread ? worker(1) : "/cpu:0");
    m.noise1 = random::normal({8, 16}, 0, 0.01);
    h = tanh(matmul(m.x, vars[0].value() + m.noise1) + vars[1].value());
  }
  {
    DeviceScope on(spread ? worker(2) : "/cpu:0");
    m.noise2 = random::normal({16, 4}, 0, 0.01);
    out = matmul(h, vars[2].value() + m.noise2) + vars[3].value();
  }
  m.loss = identity(reduce_mean(square(out - m.y)), "loss");
  m.train = m.sgd->apply_gradients(tape.gradient(m.loss, vars), vars);
  return m;
}

TEST(Cluster, TrainingWithLayersOnTwoTasksGivesTheLossesOfOneProcess) {
  std::vector<float> xv(32 * 8), yv(32 * 4);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = std::cos(0.7f * static_cast<float>(i));
  const Tensor xs = Tensor::from_host(float32, {32, 8}, xv.data());
  const Tensor ys = Tensor::from_host(float32, {32, 4}, yv.data());

  // Each step's loss and the noise layer 1 and layer 2 drew in it.
  struct Step {
    float loss;
    std::vector<float> noise1, noise2;
  };
  auto train = [&](Model& m, Session& sess) {
    std::vector<Step> steps;
    for (int step = 0; step < 10; ++step) {
      const std::vector<Tensor> r = sess.run({{m.x, xs}, {m.y, ys}}, {m.loss, m.noise1, m.noise2}, {m.train});
      steps.push_back({r[0].item<float>(), r[1].to_vector<float>(), r[2].to_vector<float>()});
    }
    return steps;
  };
  random::set_seed(2024);
  Model local = build_model(false);
  Session one(local.g);
  const std::vector<Step> a = train(local, one);
  random::set_seed(2024);
  Model spread = build_model(true);
  Session many(spread.g, *g_cluster);
  const std::vector<Step> b = train(spread, many);
  for (size_t step = 0; step < a.size(); ++step) {
    EXPECT_EQ(a[step].loss, b[step].loss) << "step " << step;
    EXPECT_EQ(a[step].noise1, b[step].noise1) << "step " << step;
    EXPECT_EQ(a[step].noise2, b[step].noise2) << "step " << step;
  }
  EXPECT_NE(a[0].noise1, a[1].noise1) << "an unseeded op draws new numbers on every step";
  EXPECT_NE(a[0].noise2, a[1].noise2) << "an unseeded op draws new numbers on every step";
  std::set<std::string> tasks;
  for (const auto& [node, device] : many.placement()) tasks.insert(device.substr(0, device.find("/device:")));
  EXPECT_TRUE(tasks.contains("/job:worker/replica:0/task:1") && tasks.contains("/job:worker/replica:0/task:2"));
  // The draws really ran on the workers.
  const auto where = many.placement();
  auto node_of = [](const Tensor& t) {
    const std::string name = t.name();
    return name.substr(0, name.rfind(':'));
  };
  const std::string noise1 = node_of(spread.noise1), noise2 = node_of(spread.noise2);
  ASSERT_TRUE(where.contains(noise1) && where.contains(noise2));
  EXPECT_EQ(where.at(noise1).rfind("/job:worker/replica:0/task:1/", 0), 0u) << where.at(noise1);
  EXPECT_EQ(where.at(noise2).rfind("/job:worker/replica:0/task:2/", 0), 0u) << where.at(noise2);
}

TEST(Cluster, AKernelErrorOnATaskIsRaisedOnTheChiefNamingTaskAndLine) {
  Graph g;
  Tensor idx, out;
  {
    GraphScope scope(g);
    idx = placeholder(int32, {2}, "idx");
    Tensor table = constant(std::vector<float>{1, 2, 3, 4}, Shape{4});
    Tensor rows;
    {
      DeviceScope on(worker(2));
      rows = gather(table, idx);
    }
    DeviceScope on(worker(1));
    out = rows * 2.f;
  }
  Session sess(g, *g_cluster);
  const std::vector<int32_t> good_i = {3, 0}, bad_i = {1, 9};
  const Tensor good = Tensor::from_host(int32, {2}, good_i.data()), bad = Tensor::from_host(int32, {2}, bad_i.data());
  EXPECT_EQ(sess.run({{idx, good}}, {out})[0].to_vector<float>(), (std::vector<float>{8.f, 2.f}));
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      (void)sess.run({{idx, bad}}, {out});
      ADD_FAILURE() << "index 9 is out of range";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("task:2"), std::string::npos) << what;
      EXPECT_NE(what.find("gather"), std::string::npos) << what;
      EXPECT_NE(what.find("cluster_session_test.cpp"), std::string::npos) << what;
    }
    EXPECT_EQ(sess.run({{idx, good}}, {out})[0].to_vector<float>(), (std::vector<float>{8.f, 2.f}));
  }
}

// A partition that receives nothing (its index is a variable made from a concrete tensor, whose
// value the chief holds and assigns on task 2 in the first run): its error reaches the chief, and
// the session goes on.
TEST(Cluster, AFailingPartitionWithoutFeedsIsRaisedOnTheChief) {
  Graph g;
  Tensor bad_rows, good_rows;
  {
    GraphScope scope(g);
    DeviceScope on(worker(2));
    const Tensor table = constant(std::vector<float>{1, 2, 3, 4}, Shape{4});
    const std::vector<int32_t> bad_i = {1, 9};
    Variable index(Tensor::from_host(int32, {2}, bad_i.data()), "bad_index");
    bad_rows = gather(table, index.value());
    good_rows = table * 2.f;
  }
  Session sess(g, *g_cluster);
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      (void)sess.run({bad_rows});
      ADD_FAILURE() << "index 9 is out of range";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("task:2"), std::string::npos) << what;
      EXPECT_NE(what.find("gather"), std::string::npos) << what;
    }
    EXPECT_EQ(sess.run({good_rows})[0].to_vector<float>(), (std::vector<float>{2.f, 4.f, 6.f, 8.f}));
  }
}

TEST(Cluster, FeedsFetchesControlEdgesAndVariablesAcrossTasks) {
  Graph g;
  Tensor x, a, b, total, bump, counter_now;
  Variable counter;
  {
    GraphScope scope(g);
    x = placeholder(float32, {3}, "x");
    {
      DeviceScope on(worker(1));
      counter = Variable(zeros({3}), "counter", /*trainable=*/false);
      a = relu(x) + 1.f;
    }
    {
      DeviceScope on(worker(2));
      b = x * 3.f;
      bump = counter.assign_add(b);
    }
    total = a + b;
    counter_now = identity(counter.value(), "counter_now");
  }
  Session sess(g, *g_cluster);
  const Tensor xs = constant({1.f, -2.f, 3.f});
  auto out = sess.run({{x, xs}}, {a, b, total}, {bump});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2.f, 1.f, 4.f}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{3.f, -6.f, 9.f}));
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{5.f, -5.f, 13.f}));
  (void)sess.run({{x, xs}}, {}, {bump});
  EXPECT_EQ(sess.run({counter_now})[0].to_vector<float>(), (std::vector<float>{6.f, -12.f, 18.f}));
}

// Where tasks 1 and 2 each have a GPU: tensors go between those GPUs (through NCCL, unless
// WEFT_NCCL_RENDEZVOUS=0 sends them through the hosts), both ways, for several steps with new
// values each time, and arrive exact.
TEST(Cluster, TensorsCrossBetweenTheGpusOfTwoTasks) {
  std::set<std::string> devices;
  for (const DeviceInfo& d : g_cluster->devices()) devices.insert(d.name);
  for (int t : {1, 2})
    if (!devices.contains("/job:worker/replica:0/task:" + std::to_string(t) + "/device:GPU:0"))
      GTEST_SKIP() << "task " << t << " has no GPU";
  const int64_t n = 300000;
  Graph g;
  Tensor x, a, c, total;
  {
    GraphScope scope(g);
    x = placeholder(float32, {n}, "x");
    Tensor b;
    { DeviceScope on(worker(1) + "/device:GPU:0"); a = x * 2.f + 1.f; }
    { DeviceScope on(worker(2) + "/device:GPU:0"); b = relu(a - 3.f); }
    { DeviceScope on(worker(1) + "/device:GPU:0"); c = b * a; total = reduce_sum(c); }
  }
  Session sess(g, *g_cluster);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> xs(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    double want_total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>((i * 7 + step) % 41) - 20.f, av = v * 2.f + 1.f;
      xs[static_cast<size_t>(i)] = v;
      want[static_cast<size_t>(i)] = std::max(av - 3.f, 0.f) * av;
      want_total += want[static_cast<size_t>(i)];
    }
    auto out = sess.run({{x, Tensor::from_host(float32, {n}, xs.data())}}, {c, total});
    const std::vector<float> got = out[0].to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    int64_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
    EXPECT_EQ(wrong, 0) << "values differ at step " << step;
    EXPECT_NEAR(out[1].item<float>(), want_total, 1e-5 * want_total) << "step " << step;
  }
}

// Small feeds and fetches ride in the step's own messages, big ones take the MPI rendezvous
// (scheduler/step_rendezvous.h); a fetched value that the chief sends on stays in the rendezvous. Each
// step's values are new, so a tensor left from an earlier step would show.
TEST(Cluster, SmallAndBigFeedsAndFetchesAgreeWhicheverWayTheyTravel) {
  const int64_t big = static_cast<int64_t>(kMaxStepMessageTensorBytes / sizeof(float)) + 8;
  Graph g;
  Tensor small_in, big_in, small_out, big_out, twice_sent, summed;
  {
    GraphScope scope(g);
    small_in = placeholder(float32, {3}, "small_in");
    big_in = placeholder(float32, {big}, "big_in");
    Tensor there;
    {
      DeviceScope on(worker(1));
      small_out = small_in * 2.f;
      big_out = big_in + 1.f;
      there = reduce_sum(big_in) + reduce_sum(small_in);
    }
    const Tensor here = there * 10.f;  // on the chief, and sent on to task 2
    {
      DeviceScope on(worker(2));
      twice_sent = small_in - 1.f;  // small_in goes to task 1 and to task 2
      summed = here + 1.f;
    }
  }
  Session sess(g, *g_cluster);
  for (int step = 1; step <= 4; ++step) {
    const auto s = static_cast<float>(step);
    const Tensor small = constant({s, 2 * s, 3 * s});
    const Tensor large = fill({big}, s);
    const auto out = sess.run({{small_in, small}, {big_in, large}}, {small_out, big_out, twice_sent, summed});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2 * s, 4 * s, 6 * s})) << step;
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(static_cast<size_t>(big), s + 1)) << step;
    EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{s - 1, 2 * s - 1, 3 * s - 1})) << step;
    EXPECT_EQ(out[3].item<float>(), (static_cast<float>(big) * s + 6 * s) * 10.f + 1.f) << step;
  }
}

TEST(Cluster, EveryTaskTakesPartInOneStep) {
  Graph g;
  Tensor x, total;
  {
    GraphScope scope(g);
    x = placeholder(float32, {2}, "x");
    total = x;
    for (int t = 1; t < g_cluster->num_tasks(); ++t) {
      Tensor part;
      {
        DeviceScope on(worker(t));
        part = x * static_cast<float>(t);
      }
      total = total + part;  // on the chief: each task's part comes back over MPI
    }
  }
  Session sess(g, *g_cluster);
  const int n = g_cluster->num_tasks();
  const float scale = 1.f + static_cast<float>(n * (n - 1) / 2);
  ClusterRuntime& runtime = *chief_runtime();
  const uint64_t sent_before = runtime.step_messages_sent.load();
  for (int step = 0; step < 20; ++step) {
    const float v = static_cast<float>(step);
    EXPECT_EQ(sess.run({{x, constant({v, -v})}}, {total})[0].to_vector<float>(),
              (std::vector<float>{scale * v, -scale * v}));
  }
  // The chief itself sends each step to at most the tree's fan-out of tasks (cluster/step_tree.h);
  // the others get it down the tree, and every task's part still comes back.
  EXPECT_EQ(runtime.step_messages_sent.load() - sent_before, 20u * static_cast<uint64_t>(std::min(runtime.step_fan_out, n - 1)));
  std::set<std::string> tasks;
  for (const auto& [node, device] : sess.placement()) tasks.insert(device.substr(0, device.find("/device:")));
  EXPECT_EQ(static_cast<int>(tasks.size()), n);
}

// A kernel error on the last task, the deepest in the step's tree when every task takes part
// (cluster_mpi.np8_tree makes the tree 3 levels deep): raised on the chief naming it, at once (it
// does not wait for the tree), and the next steps work.
TEST(Cluster, AnErrorDeepInTheStepTreeIsRaisedOnTheChief) {
  const int n = g_cluster->num_tasks();
  Graph g;
  Tensor idx, total;
  {
    GraphScope scope(g);
    idx = placeholder(int32, {2}, "idx");
    const Tensor table = constant(std::vector<float>{1, 2, 3, 4}, Shape{4});
    total = constant(0.f);
    for (int t = 1; t < n; ++t) {
      DeviceScope on(worker(t));
      Tensor part = t == n - 1 ? reduce_sum(gather(table, idx)) : reduce_sum(table) * static_cast<float>(t);
      total = total + part;
    }
  }
  Session sess(g, *g_cluster);
  const std::vector<int32_t> good_i = {3, 0}, bad_i = {1, 9};
  const Tensor good = Tensor::from_host(int32, {2}, good_i.data()), bad = Tensor::from_host(int32, {2}, bad_i.data());
  const float expected = 10.f * static_cast<float>((n - 2) * (n - 1) / 2) + 5.f;
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_EQ(sess.run({{idx, good}}, {total})[0].item<float>(), expected);
    try {
      (void)sess.run({{idx, bad}}, {total});
      ADD_FAILURE() << "index 9 is out of range";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("task:" + std::to_string(n - 1)), std::string::npos) << what;
      EXPECT_NE(what.find("gather"), std::string::npos) << what;
    }
  }
}

// Each task reads its own replica's rows with ReadShardedBatch: the cursor lives on the task that
// runs the node (the chief's own state for that replica never moves), and the rows fetched back
// are the replica's share of each global batch, over an epoch boundary and a short last batch.
TEST(Cluster, EachTaskReadsItsOwnShardOfTheBatch) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("weft_cluster_shard_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  const int64_t n = 11, global = 4;
  std::string x_bytes = {0, 0, 8, 2, 0, 0, 0, static_cast<char>(n), 0, 0, 0, 2};
  std::string y_bytes = {0, 0, 8, 1, 0, 0, 0, static_cast<char>(n)};
  for (int64_t i = 0; i < n; ++i) {
    x_bytes += {static_cast<char>(2 * i), static_cast<char>(2 * i + 1)};
    y_bytes += static_cast<char>(i);
  }
  for (auto [name, bytes] : {std::pair{"/x.idx", &x_bytes}, {"/y.idx", &y_bytes}}) {
    std::ofstream f(dir + name, std::ios::binary);
    f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  }
  auto input = data::ShardedInput::idx(dir + "/x.idx", dir + "/y.idx", global).source("cluster_shard");
  const int64_t replicas = g_cluster->num_tasks();
  Graph g;
  std::vector<std::vector<Tensor>> reads;
  {
    GraphScope scope(g);
    for (int64_t t = 0; t < replicas; ++t) {
      DeviceScope on(worker(static_cast<int>(t)));
      reads.push_back(input.read(t, replicas));
    }
  }
  std::vector<TensorRef> fetches;
  for (const auto& r : reads) fetches.insert(fetches.end(), {r[1], r[2]});
  Session sess(g, *g_cluster);
  for (int64_t step = 0; step < 7; ++step) {
    const int64_t begin = (step % 3) * global, size = std::min(global, n - begin);
    std::vector<Tensor> out = sess.run(fetches);
    float weights = 0;
    for (int64_t t = 0; t < replicas; ++t) {
      const RowRange rows = shard_rows(size, replicas, t);
      std::vector<int32_t> want(static_cast<size_t>(rows.count));
      std::iota(want.begin(), want.end(), static_cast<int32_t>(begin + rows.start));
      EXPECT_EQ(out[2 * t].to_vector<int32_t>(), want) << "step " << step << " task " << t;
      weights += out[2 * t + 1].item<float>();
    }
    EXPECT_FLOAT_EQ(weights, 1.f) << "step " << step;
  }
  EXPECT_EQ(sharded_input_position("cluster_shard", 0), (ShardedPosition{2, 1}));
  for (int64_t t = 1; t < replicas; ++t)
    EXPECT_EQ(sharded_input_position("cluster_shard", t), (ShardedPosition{0, 0})) << "task " << t << "'s cursor is its own";
  std::filesystem::remove_all(dir);
}

TEST(Cluster, AStepPastItsDeadlineNamesTheTasksStillRunning) {
  Graph g;
  Tensor x, out;
  {
    GraphScope scope(g);
    x = placeholder(float32, {384, 384}, "x");
    DeviceScope on(worker(2));
    Tensor h = x;
    for (int i = 0; i < 40; ++i) h = tanh(matmul(h, x));  // ~40 x 113 MFLOP on task 2
    out = reduce_sum(h);
  }
  Session sess(g, *g_cluster, {.operation_timeout_ms = 5});
  const Tensor xs = random::uniform({384, 384}, -0.05, 0.05, 5);
  try {
    (void)sess.run({{x, xs}}, {out});
    ADD_FAILURE() << "the step cannot finish in 5 ms";
  } catch (const DeadlineExceeded& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("deadline of 5 ms"), std::string::npos) << what;
    EXPECT_NE(what.find("still running: /job:worker/replica:0/task:2"), std::string::npos) << what;
  }
}

// A task runs a step on the thread that reads the chief's requests (cluster/task_server.h). A
// kernel that keeps that thread busy longer than the liveness timeout must not make the task
// look lost: the standby thread answers the chief's pings meanwhile. ctest runs this one alone
// with a 2 s liveness timeout, the shortest accepted (kMinLivenessTimeout; cluster_mpi.busy_task);
// the step, a loop of products on task 2, is sized to last about 2.5 times as long.
TEST(Cluster, ATaskBusyLongerThanTheLivenessTimeoutIsNotLost) {
  const char* timeout_text = std::getenv("WEFT_LIVENESS_TIMEOUT_MS");
  if (!timeout_text) GTEST_SKIP() << "run with a short WEFT_LIVENESS_TIMEOUT_MS (ctest: cluster_mpi.busy_task)";
  const double liveness_s = std::atof(timeout_text) / 1000;
  Graph g;
  Tensor n, x, out;
  {
    GraphScope scope(g);
    n = placeholder(float32, {}, "n");
    x = placeholder(float32, {128, 128}, "x");
    DeviceScope on(worker(2));
    const std::vector<Tensor> r = while_loop(
        [](const std::vector<Tensor>& v) { return v[0] < v[1]; },
        [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + 1.f, v[1], tanh(matmul(v[2], x))}; },
        {constant(0.f), n, x});
    out = reduce_sum(r[2]);
  }
  Session sess(g, *g_cluster);
  const Tensor xs = random::uniform({128, 128}, -0.05, 0.05, 8);
  auto seconds_for = [&](float iterations) {
    const auto t0 = std::chrono::steady_clock::now();
    const float v = sess.run({{n, constant(iterations)}, {x, xs}}, {out})[0].item<float>();
    EXPECT_TRUE(std::isfinite(v));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double per_iteration = seconds_for(200.f) / 200;
  const float iterations = static_cast<float>(std::ceil(2.5 * liveness_s / per_iteration));
  double took = seconds_for(iterations);  // throws Unavailable if task 2 were declared lost
  if (took < 1.5 * liveness_s) took = seconds_for(iterations * static_cast<float>(std::ceil(2.5 * liveness_s / took)));
  ASSERT_GT(took, liveness_s) << "the step must outlast the liveness timeout, or this tests nothing";
  EXPECT_EQ(sess.run({{n, constant(3.f)}, {x, xs}}, {out}).size(), 1u);  // the session goes on
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// The step's chief fetches, from task 1, twice what task 2's TestSleep gives: when it sleeps, task 2
// runs it, task 1 waits in a Recv for it, and the chief in a Recv for task 1's.
TEST(Cluster, AStalledStepIsReportedThenEndedAndTheNextStepWorks) {
  Graph g;
  Tensor ms, out;
  {
    GraphScope scope(g);
    ms = placeholder(float32, {1}, "ms");
    out = testing::sleep_then_double(ms, worker(2), worker(1));
  }
  Session sess(g, *g_cluster, {.stall_warning_ms = 1000, .stall_timeout_ms = 2500});
  EXPECT_EQ(sess.run({{ms, constant(std::vector<float>{1.f}, Shape{1})}}, {out})[0].to_vector<float>(),
            (std::vector<float>{2.f}));
  ::testing::internal::CaptureStderr();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)sess.run({{ms, constant(std::vector<float>{4500.f}, Shape{1})}}, {out});
    ADD_FAILURE() << "a step stalled past its stall timeout was not ended";
  } catch (const DeadlineExceeded& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stalled"), std::string::npos) << what;
    EXPECT_NE(what.find("running"), std::string::npos) << what;
    EXPECT_NE(what.find("(test_sleep) created at"), std::string::npos) << what;
    EXPECT_NE(what.find("cluster_session_test.cpp"), std::string::npos) << what;
    EXPECT_NE(what.find("task:2:"), std::string::npos) << what;
    EXPECT_NE(what.find("waiting"), std::string::npos) << what;  // task 1's Recv
  }
  const double ended = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(ended, 2.5);
  EXPECT_LT(ended, 4.5) << "the step was not ended at its stall timeout but waited for the kernel";
  // The warning's report came first, on stderr.
  EXPECT_NE(printed.find("stalls: what it runs and waits for"), std::string::npos) << printed;
  EXPECT_NE(printed.find("(test_sleep) created at"), std::string::npos) << printed;
  // The next steps work (task 2's stuck step still sleeps meanwhile).
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(sess.run({{ms, constant(std::vector<float>{3.f}, Shape{1})}}, {out})[0].to_vector<float>(),
              (std::vector<float>{6.f}));
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::testing::register_test_sleep();
  // cluster_mpi.mismatched_builds: a task whose op registry differs from the chief's.
  if (std::getenv("WEFT_TEST_EXTRA_OP")) weft::op_registry().add({.name = "TestOnlyExtraOp", .min_inputs = 1, .max_inputs = 1});
  weft::Cluster cluster = weft::cluster::init(argc, argv);  // the other tasks serve here
  weft::g_cluster = &cluster;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
