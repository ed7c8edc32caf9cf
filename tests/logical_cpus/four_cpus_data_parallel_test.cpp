// DataParallel in one process of four logical CPUs: four replicas, whose gradients meet in
// process (in member order), train like one replica on the same global batches; the copies stay
// identical bit for bit. Runs in the FourCpus suite (WEFT_LOGICAL_CPUS=4, see tests/CMakeLists.txt).
#include "distribute/data_parallel_training.h"

#include <cstdlib>
#include <cstring>

#include "cluster/cluster.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

bool four_cpus() {
  const char* n = std::getenv("WEFT_LOGICAL_CPUS");
  return n && std::string(n) == "4";
}

TEST(FourCpusDataParallel, AReplicaPerLogicalCpu) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  ASSERT_EQ(dp.num_replicas(), 4);
  EXPECT_NE(dp.replica_devices()[3].find("device:CPU:3"), std::string::npos);
}

TEST(FourCpusDataParallel, TrainsLikeOneProcessWithUnevenBatches) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster, {.bucket_bytes = 4096, .first_bucket_bytes = 1024});
  testing::expect_data_parallel_matches_one_process(dp, [] { return optim::Adam(0.01); }, 5,
                                                    [](int step) { return int64_t{30 + step}; });
}

TEST(FourCpusDataParallel, ReplicasStayIdenticalBitForBit) {
  if (!four_cpus()) GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4";
  Cluster cluster;
  distribute::DataParallel dp(cluster);
  testing::Classifier c;
  optim::SGD sgd(0.1, 0.9);
  auto step = dp.function([&](Tensor x, Tensor y) { return testing::train_step(c, sgd, x, y); });
  for (int i = 0; i < 10; ++i) {
    auto [x, y] = testing::classifier_batch(17 + i, 3 + i);
    step(x, y);
  }
  for (const Variable& v : c.model.trainable_variables()) {
    const std::vector<Tensor> values = dp.replica_values(v);
    ASSERT_EQ(values.size(), 4u);
    for (size_t r = 1; r < values.size(); ++r)
      EXPECT_EQ(std::memcmp(raw_data(values[r]), raw_data(values[0]), values[0].nbytes()), 0)
          << v.name() << " differs on replica " << r;
  }
}

}  // namespace
}  // namespace weft
