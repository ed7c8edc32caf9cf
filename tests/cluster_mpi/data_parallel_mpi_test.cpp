// Data-parallel training under mpirun (2 and 4 ranks): task 0 runs these tests, the others serve
// inside cluster::init. Losses and weights equal one-process training on the same global batches
// (1e-5 relative), uneven last batches included; the replicas' variables are identical bit for
// bit; an error on one replica is raised here, and training goes on afterwards.
#include "distribute/data_parallel_training.h"

#include <cstring>

#include "api/weft/weft.h"
#include "cluster_mpi/test_sleep_op.h"
#include "runtime/tensor_internals.h"

namespace weft {

Cluster* g_cluster = nullptr;

namespace {

// One replica per task: its GPU where every task has one (the collectives then go through NCCL),
// else its CPU.
TEST(DataParallelMpi, OneReplicaPerTask) {
  distribute::DataParallel dp(*g_cluster);
  ASSERT_EQ(dp.num_replicas(), g_cluster->num_tasks());
  bool gpus = false;
  for (const DeviceInfo& d : g_cluster->devices()) gpus = gpus || d.type == "GPU";
  for (int t = 0; t < g_cluster->num_tasks(); ++t)
    EXPECT_EQ(dp.replica_devices()[static_cast<size_t>(t)],
              g_cluster->task_names()[static_cast<size_t>(t)] + (gpus ? "/device:GPU:0" : "/device:CPU:0"));
}

TEST(DataParallelMpi, SgdMatchesOneProcessWithUnevenBatches) {
  distribute::DataParallel dp(*g_cluster);
  // 64 rows split evenly; 37 and 5 rows leave some replicas a row more than others.
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::SGD(0.1); }, 6,
                                                    [](int step) { return step == 3 ? int64_t{37} : step == 5 ? int64_t{5} : int64_t{64}; });
}

TEST(DataParallelMpi, AdamMatchesOneProcessWithSmallBuckets) {
  // Small buckets: each layer's gradients are all-reduced by buckets of their own, several per step.
  distribute::DataParallel dp(*g_cluster, {.bucket_bytes = 2048, .first_bucket_bytes = 512});
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::Adam(0.01); }, 5,
                                                    [](int) { return int64_t{48}; });
}

TEST(DataParallelMpi, ReplicasStayIdenticalBitForBit) {
  distribute::DataParallel dp(*g_cluster, {.bucket_bytes = 4096, .first_bucket_bytes = 1024});
  testing::Classifier c;
  optim::Adam adam(0.01);
  auto step = dp.function([&](Tensor x, Tensor y) { return testing::train_step(c, adam, x, y); });
  for (int i = 0; i < 30; ++i) {
    auto [x, y] = testing::classifier_batch(29 + i, 7 + i);
    step(x, y);
  }
  std::vector<Variable> vars = c.model.trainable_variables();
  for (const Variable& slot : adam.variables()) vars.push_back(slot);
  vars.push_back(adam.iterations_variable());
  for (const Variable& v : vars) {
    // On the host: the replicas' values are on their devices (GPUs where the tasks have them).
    std::vector<Tensor> values;
    for (const Tensor& t : dp.replica_values(v)) values.push_back(t.to(cpu_device()));
    ASSERT_EQ(values.size(), static_cast<size_t>(dp.num_replicas()));
    for (size_t r = 1; r < values.size(); ++r) {
      ASSERT_EQ(values[r].nbytes(), values[0].nbytes());
      EXPECT_EQ(std::memcmp(raw_data(values[r]), raw_data(values[0]), values[0].nbytes()), 0)
          << v.name() << " differs between replica 0 and replica " << r;
    }
    // Replica 0's are the model's own.
    const Tensor own = v.value().to(cpu_device());
    EXPECT_EQ(std::memcmp(raw_data(values[0]), raw_data(own), values[0].nbytes()), 0) << v.name();
  }
  EXPECT_EQ(adam.iterations(), 30);
}

// Each replica's copy of an unseeded op draws numbers of its own, as TensorFlow's replicas do:
// DataParallel compiles the replicated step on the chief, which gives every copy its own key from
// the chief's seed sequence (runtime/random_seed.h). After the same set_seed, the same numbers.
TEST(DataParallelMpi, ReplicasOfAnUnseededOpDrawTheirOwnNumbersReproducibly) {
  auto draws = [](int64_t seed) {
    random::set_seed(seed);
    distribute::DataParallel dp(*g_cluster);
    Variable noise(zeros({64}), "replica_noise");
    auto step = dp.function([&](Tensor x) {
      noise.assign(random::uniform({64}));
      return reduce_mean(x);
    });
    (void)step(ones({8, 2}));
    std::vector<std::vector<float>> out;
    for (const Tensor& t : dp.replica_values(noise)) out.push_back(t.to_vector<float>());
    return out;
  };
  const std::vector<std::vector<float>> a = draws(3), b = draws(3);
  ASSERT_EQ(a.size(), static_cast<size_t>(g_cluster->num_tasks()));
  EXPECT_EQ(a, b);
  for (size_t r = 1; r < a.size(); ++r) EXPECT_NE(a[r], a[0]) << "replica " << r << " drew replica 0's numbers";
  EXPECT_NE(a[0], std::vector<float>(64, 0.f)) << "the step did not assign the draw";
}

TEST(DataParallelMpi, ErrorOnOneReplicaIsRaisedAndTrainingGoesOn) {
  distribute::DataParallel dp(*g_cluster);
  testing::Classifier parallel, single;
  testing::copy_weights(single, parallel, testing::classifier_batch(4, 1).first);
  optim::SGD sgd_p(0.1), sgd_s(0.1);
  auto dp_step = dp.function([&](Tensor x, Tensor y) { return testing::train_step(parallel, sgd_p, x, y); });
  auto one_step = function([&](Tensor x, Tensor y) { return testing::train_step(single, sgd_s, x, y); });
  auto [x, y] = testing::classifier_batch(32, 5);
  EXPECT_NEAR(dp_step(x, y).item<float>(), one_step(x, y).item<float>(), 1e-5);
  // A label out of range in the last replica's rows only: its loss kernel fails there.
  std::vector<int32_t> labels = y.to_vector<int32_t>();
  labels.back() = 99;
  const Tensor bad = Tensor::from_host(int32, {32}, labels.data());
  const std::string last_task = g_cluster->task_names().back();
  try {
    dp_step(x, bad);
    FAIL() << "the failing replica's error was not raised";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(last_task), std::string::npos) << e.what();
  }
  // The replicas are set right again (collectives reset, variables broadcast): training goes on
  // and still matches one process, whatever the failed step left behind on the replicas.
  for (int i = 0; i < 3; ++i) {
    auto [xb, yb] = testing::classifier_batch(32, 50 + i);
    const float lp = dp_step(xb, yb).item<float>(), ls = one_step(xb, yb).item<float>();
    EXPECT_NEAR(lp, ls, 1e-5f * std::max(1.f, std::abs(ls))) << "step " << i << " after the error";
  }
}

// One replica is stuck in a kernel before its gradients' all-reduce: the others wait in the
// collective for it. The stall report names the member that has not joined, and the step ends at
// the stall timeout.
TEST(DataParallelMpi, ACollectiveOneReplicaNeverJoinsIsReportedNamingIt) {
  distribute::DataParallel dp(*g_cluster, {.stall_warning_ms = 1000, .stall_timeout_ms = 3000});
  Variable w(ones({1}), "stall_w");
  optim::SGD sgd(0.01);
  auto step = dp.function([&](Tensor ms) {
    GradientTape tape;
    Tensor slept = testing::test_sleep(reshape(reduce_max(ms), Shape{1}));
    Tensor loss = reduce_sum(w * slept);
    sgd.apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), std::vector<Variable>{w});
    return loss;
  });
  const int64_t n = dp.num_replicas();
  std::vector<float> quick(static_cast<size_t>(n), 1.f), stuck = quick;
  stuck.back() = 5000.f;  // the last replica's row
  EXPECT_NO_THROW((void)step(Tensor::from_host(float32, {n}, quick.data())).item<float>());
  const std::string last_task = g_cluster->task_names().back();
  try {
    (void)step(Tensor::from_host(float32, {n}, stuck.data())).item<float>();
    FAIL() << "the stalled step was not ended";
  } catch (const DeadlineExceeded& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a collective waits"), std::string::npos) << what;
    EXPECT_NE(what.find("not joined: " + last_task), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::testing::register_test_sleep();
  weft::Cluster cluster = weft::cluster::init(argc, argv);  // the other tasks serve here
  weft::g_cluster = &cluster;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
