// Two-process GPU tests without MPI: the test binary runs itself again as children (one per rank,
// each filtered to one child test), hands them a folder to meet in through the environment, and
// waits for them within a bound.
//
// NCCL refuses two ranks of one communicator on one GPU: it detects the duplicate by (host, bus
// id), the host being a hash of the host name and boot id, or of NCCL_HOSTID where that is set.
// So with two GPUs each child gets one; with one GPU both children use it and each says it is a
// host of its own (NCCL_HOSTID), which makes NCCL move their bytes through its network transport
// over the loopback interface instead of through shared memory or NVLink. Their communicators,
// tickets, stream ordering and abort paths are the ones a real two-host job runs.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

extern char** environ;

namespace weft::gpu_test {

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

// Runs this test binary again, filtered to `test`, with the parent's environment but for the
// names `extra` sets. Returns the child's pid, or -1.
inline pid_t spawn_test_child(const std::string& test, const std::vector<std::string>& extra) {
  auto named_in_extra = [&](const char* entry) {
    for (const std::string& e : extra) {
      const size_t eq = e.find('=');
      if (std::strncmp(entry, e.c_str(), eq + 1) == 0) return true;
    }
    return false;
  };
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (!named_in_extra(*e)) envp.push_back(*e);
  for (const std::string& e : extra) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + test;
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

// The child's exit status within `limit`, else it is killed and the result says so.
inline std::string wait_test_child(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "still running after " + std::to_string(limit.count()) + " s; killed";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "exit status " + std::to_string(WEXITSTATUS(status));
  return "killed by signal " + std::to_string(WTERMSIG(status));
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

// A fresh folder for the children to meet in, removed with what they left.
class MeetingFolder {
 public:
  MeetingFolder() {
    char pattern[] = "/tmp/weft_gpu_children_XXXXXX";
    if (mkdtemp(pattern)) path_ = pattern;
  }
  ~MeetingFolder() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  MeetingFolder(const MeetingFolder&) = delete;
  MeetingFolder& operator=(const MeetingFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace weft::gpu_test
