// Two-process GPU tests without MPI: the test binary runs itself again as children (one per rank,
// each filtered to one child test: test_child_process.h), hands them a folder to meet in through
// the environment (a weft::testing::TempDir), and waits for them within a bound.
//
// NCCL refuses two ranks of one communicator on one GPU: it detects the duplicate by (host, bus
// id), the host being a hash of the host name and boot id, or of NCCL_HOSTID where that is set.
// So with two GPUs each child gets one; with one GPU both children use it and each says it is a
// host of its own (NCCL_HOSTID), which makes NCCL move their bytes through its network transport
// over the loopback interface instead of through shared memory or NVLink. Their communicators,
// tickets, stream ordering and abort paths are the ones a real two-host job runs.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "temp_dir.h"
#include "test_child_process.h"

namespace weft::gpu_test {

using weft::testing::spawn_test_child;
using weft::testing::TempDir;
using weft::testing::wait_test_child;

inline int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// Environment entries for rank `rank` of a two-process NCCL test: its GPU, and on a machine with
// one GPU, a host of its own on the loopback interface (see the top of this file).
inline std::vector<std::string> nccl_rank_environment(int rank) {
  if (gpu_count() >= 2) return {"CUDA_VISIBLE_DEVICES=" + std::to_string(rank)};
  return {"CUDA_VISIBLE_DEVICES=0", "NCCL_HOSTID=weft-test-host-" + std::to_string(rank), "NCCL_SOCKET_IFNAME=lo",
          "NCCL_IB_DISABLE=1"};
}

// Waits for another process to write `path` (written whole: renamed into place).
inline bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::ifstream(path).good()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline void write_file_whole(const std::string& path, const std::string& text) {
  std::ofstream(path + ".part") << text;
  std::rename((path + ".part").c_str(), path.c_str());
}

}  // namespace weft::gpu_test
