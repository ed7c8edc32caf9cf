// How many cores a process uses (runtime/device.h, cores_for_this_process): the processes of one
// job on one host share it instead of each sizing its pools to the whole machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/device.h"

namespace weft {
namespace {

TEST(HostCores, AloneAProcessUsesEveryCore) {
  EXPECT_EQ(cores_for_this_process(8, 8, 1, 0), 8);
  EXPECT_EQ(cores_for_this_process(8, 0, 1, 0), 8);  // no binding known
}

TEST(HostCores, ABoundProcessUsesTheCoresOfItsBinding) {
  // mpirun -np 2 on 2 cores binds each rank to one core.
  EXPECT_EQ(cores_for_this_process(2, 1, 2, 0), 1);
  EXPECT_EQ(cores_for_this_process(16, 4, 4, 0), 4);
  EXPECT_EQ(cores_for_this_process(16, 4, 1, 0), 4);  // taskset alone
}

TEST(HostCores, RanksBoundToASocketEachStillShareTheMachine) {
  // 3 ranks on 2 sockets of 4 cores, each bound to a socket: 2 cores each, not 4.
  EXPECT_EQ(cores_for_this_process(8, 4, 3, 0), 2);
}

TEST(HostCores, UnboundProcessesOfOneJobShareTheHost) {
  EXPECT_EQ(cores_for_this_process(16, 16, 4, 0), 4);
  EXPECT_EQ(cores_for_this_process(2, 2, 4, 0), 1);  // oversubscribed: one each, never zero
  EXPECT_EQ(cores_for_this_process(2, 2, 3, 0), 1);
}

TEST(HostCores, WeftNumThreadsWins) {
  EXPECT_EQ(cores_for_this_process(2, 1, 2, 6), 6);
  EXPECT_EQ(cores_for_this_process(16, 16, 4, 1), 1);
}

TEST(HostCores, TheTopologyAgreesWithTheRule) {
  const HostTopology& t = host_topology();
  EXPECT_GE(t.usable_cores, 1);
  if (!std::getenv("WEFT_NUM_THREADS")) {
    EXPECT_LE(t.usable_cores, t.physical_cores);
  }
  // The first CPU device's pool is sized from it.
  EXPECT_EQ(cpu_device()->cores(), std::max(1, t.usable_cores / logical_cpus()));
}

}  // namespace
}  // namespace weft
