// DataParallel in a process that is a cluster of one: a replica per GPU, else one on the CPU
// (whose step is exactly the traced step of weft::function). Argument and option errors. The bucket plan.
#include "distribute/data_parallel_training.h"

#include <algorithm>

#include "api/devices.h"
#include "api/distribute/gradient_buckets.h"
#include "api/distribute/replicate.h"
#include "cluster/cluster.h"
#include "reference.h"

namespace weft {
namespace {

// A process that is a cluster of one: a replica on each of its GPUs (as MirroredStrategy takes a
// machine's GPUs), else one on its CPU.
TEST(DataParallel, OneProcessHasAReplicaPerGpuElseOneOnItsCpu) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  const int gpus = ref::gpu_count();
  EXPECT_EQ(dp.num_replicas(), std::max(gpus, 1));
  ASSERT_EQ(dp.replica_devices().size(), static_cast<size_t>(dp.num_replicas()));
  EXPECT_NE(dp.replica_devices()[0].find(gpus ? "device:GPU:0" : "device:CPU:0"), std::string::npos)
      << dp.replica_devices()[0];
}

TEST(DataParallel, OneReplicaTrainsLikeWeftFunctionSgd) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::SGD(0.1); }, 4,
                                                    [](int) { return int64_t{24}; });
}

TEST(DataParallel, OneReplicaTrainsLikeWeftFunctionAdamWithChangingBatch) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::Adam(0.01); }, 4,
                                                    [](int step) { return int64_t{20 + step}; });
}

TEST(DataParallel, OneReplicaTrainsLikeWeftFunctionAdamWWithASchedule) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  testing::expect_data_parallel_matches_one_process(
      dp, [] { return optim::AdamW(optim::CosineDecay(0.02, 3, 0.1, 2), 0.1); }, 5, [](int) { return int64_t{24}; });
}

// Two GPUs of this one process (as TensorFlow's MirroredStrategy runs): their gradients meet
// through NCCL, one communicator per GPU, each instance issued once both replicas came; training
// matches one process. Needs two GPUs (which machines had them: docs/hardware.md).
TEST(DataParallel, TwoGpusOfOneProcessTrainLikeOneProcessThroughNccl) {
  const int gpus = ref::gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs in this process (it has " << gpus << ")";
  Cluster cluster;
  distribute::DataParallel dp(cluster, {.devices = {"/gpu:0", "/gpu:1"}, .bucket_bytes = 4096, .first_bucket_bytes = 1024});
  ASSERT_EQ(dp.num_replicas(), 2);
  EXPECT_TRUE(distribute::replicas_use_nccl({.devices = dp.replica_devices()}));
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::Adam(0.01); }, 5,
                                                    [](int step) { return int64_t{30 + step}; });
}

TEST(DataParallel, ArgumentErrorsNameTheProblem) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  auto step = dp.function([](Tensor x, Tensor y) { return reduce_mean(x) + reduce_mean(cast(y, float32)); });
  auto expect_error = [&](const Tensor& x, const Tensor& y, const std::string& what) {
    try {
      step(x, y);
      FAIL() << "no error for " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(ones({4, 2}), ones({3}), "has 3 rows and argument 0 has 4");
  expect_error(constant(1.f), ones({3}), "is a scalar");
  expect_error(ones({0, 2}), ones({0}), "cannot be split over 1 replicas");
}

TEST(DataParallel, StepResultsMustBeScalars) {
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  auto step = dp.function([](Tensor x) { return x * 2.f; });
  try {
    step(ones({4, 2}));
    FAIL() << "a non-scalar result was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("floating-point scalars"), std::string::npos) << e.what();
  }
}

TEST(DataParallel, DeviceOptionsAreChecked) {
  Cluster cluster;
  EXPECT_THROW(distribute::DataParallel(cluster, {.device_type = "TPU"}), InvalidArgument);
  EXPECT_THROW(distribute::DataParallel(cluster, {.devices = {"/cpu:7"}}), InvalidArgument);
  EXPECT_THROW(distribute::DataParallel(cluster, {.devices = {"/cpu:0", "/cpu:0"}}), InvalidArgument);
  distribute::DataParallel explicit_cpu(cluster, {.devices = {"/cpu:0"}});
  EXPECT_EQ(explicit_cpu.num_replicas(), 1);
}

TEST(GradientBuckets, ReverseOrderCapsAndDtypes) {
  // 4-byte floats: 1000 elements = 4000 bytes.
  std::vector<Tensor> grads = {zeros({1000}), zeros({1000}), Tensor(), zeros({1000}, float64), zeros({1000}),
                               zeros({3000})};
  const auto buckets = distribute::plan_gradient_buckets(grads, {.bucket_bytes = 8000, .first_bucket_bytes = 4000});
  // Reverse order: 5 (12000 bytes, above every cap) alone, and the first bucket; 3 (float64,
  // 8000 bytes) fills a bucket of its own dtype; 4 and 1 fill a float32 bucket (8000); 0 is left.
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0], (std::vector<size_t>{5}));
  EXPECT_EQ(buckets[1], (std::vector<size_t>{3}));
  EXPECT_EQ(buckets[2], (std::vector<size_t>{4, 1}));
  EXPECT_EQ(buckets[3], (std::vector<size_t>{0}));
  EXPECT_THROW(distribute::plan_gradient_buckets(grads, {.bucket_bytes = 0}), InvalidArgument);
}

}  // namespace
}  // namespace weft
