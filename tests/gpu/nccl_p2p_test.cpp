// The NCCL rendezvous's transport (comm/nccl/nccl_p2p.h). On one GPU: tickets number a link's
// transfers, bad tickets and keys are InvalidArgument, and a peer that never joins fails the link
// within its timeout, through the failure handler. On two GPUs: two processes (this binary, run
// again as children, one GPU each) move tensors GPU to GPU, the receiver taking its tickets in
// the reverse order, and get the sender's bytes.
//
// NEVER RUN on a GPU so far: written on a machine without one. The two-process test needs two
// GPUs (NCCL refuses two ranks on one GPU), which no machine lent to this project has had.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_p2p.h"
#include "gpu_test_util.h"
#include "runtime/cuda/cuda_context.h"

extern char** environ;

namespace weft::gpu_test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kChildDir = "WEFT_NCCL_P2P_TEST_DIR";
constexpr int kTransfers = 6;

std::string gpu_of_task(int task) { return "/job:worker/replica:0/task:" + std::to_string(task) + "/device:GPU:0"; }

RendezvousKey key_of(int k) { return {gpu_of_task(0), 0x1234, gpu_of_task(1), "t" + std::to_string(k) + ":0", 1}; }

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// Transfer k: (1000 * k + 3) int32 values k * 1000003 + i.
std::vector<int32_t> values_of(int k) {
  std::vector<int32_t> v(static_cast<size_t>(1000 * k + 3));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(k * 1000003 + static_cast<int32_t>(i));
  return v;
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::ifstream(path).good()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(NcclP2p, TicketsNumberALinksTransfersAndALinkWithoutItsPeerFailsInTime) {
  WEFT_REQUIRE_GPU();
  auto payloads = make_nccl_payloads(std::chrono::milliseconds(3000));
  ASSERT_NE(payloads, nullptr) << "a process with a GPU and NCCL has the transport";
  std::promise<std::string> failure;
  payloads->set_failure_handler([&](std::exception_ptr e) { failure.set_value(what_of(e)); });
  Device* g = gpu();
  Tensor t = Tensor::empty(DType::Float32, {16}, g);
  EXPECT_TRUE(payloads->carries(key_of(0), t));
  EXPECT_FALSE(payloads->carries(key_of(0), Tensor::empty(DType::Float32, {16}))) << "a host tensor";
  EXPECT_FALSE(payloads->carries(key_of(0), Tensor::empty(DType::Float32, {0}, g))) << "no bytes";
  RendezvousKey to_cpu = key_of(0);
  to_cpu.dst_device = "/job:worker/replica:0/task:1/device:CPU:0";
  EXPECT_FALSE(payloads->carries(to_cpu, t)) << "to a CPU";

  const DevicePayloadTicket first = payloads->send(1, key_of(0), t);
  const DevicePayloadTicket second = payloads->send(1, key_of(1), t);
  EXPECT_EQ(first.link.size(), 256u);
  EXPECT_EQ(first.link, second.link) << "one link per (GPU, peer, peer's GPU)";
  EXPECT_EQ(first.sequence, 0u);
  EXPECT_EQ(second.sequence, 1u);

  auto said = failure.get_future();
  ASSERT_EQ(said.wait_for(20s), std::future_status::ready) << "the link never failed";
  const std::string e = said.get();
  EXPECT_NE(e.find("did not join within 3000 ms"), std::string::npos) << e;
  EXPECT_NE(e.find(gpu_of_task(1)), std::string::npos) << e;
  EXPECT_THROW(payloads->send(1, key_of(2), t), Unavailable) << "the transport is aborted after a failure";
}

TEST(NcclP2p, TicketsAndKeysThatCannotBeRightAreInvalidArgument) {
  WEFT_REQUIRE_GPU();
  auto payloads = make_nccl_payloads(std::chrono::milliseconds(3000));
  ASSERT_NE(payloads, nullptr);
  payloads->set_failure_handler([](std::exception_ptr) {});
  auto nothing = [](Tensor) {};
  EXPECT_THROW(payloads->recv(0, key_of(0), DType::Float32, {4}, {"not hex", 0}, nothing), InvalidArgument);
  RendezvousKey elsewhere = key_of(0);
  elsewhere.dst_device = gpu_of_task(7);
  EXPECT_THROW(payloads->recv(0, elsewhere, DType::Float32, {4}, {std::string(256, 'a'), 0}, nothing), InvalidArgument)
      << "a key for a GPU of another task";
}

// ---- two processes, two GPUs ----

// Run only as a child of TensorsCrossBetweenTwoProcesses, on the GPU CUDA_VISIBLE_DEVICES leaves.
TEST(NcclP2pChild, Sender) {
  const char* dir = std::getenv(kChildDir);
  if (!dir) GTEST_SKIP() << "run by NcclP2p.TensorsCrossBetweenTwoProcesses";
  set_local_task("worker", 0);
  Device* g = gpu();
  ASSERT_NE(g, nullptr);
  auto payloads = make_nccl_payloads();
  ASSERT_NE(payloads, nullptr);
  std::string failed;
  payloads->set_failure_handler([&](std::exception_ptr e) { failed = what_of(e); });
  std::ostringstream tickets;
  for (int k = 0; k < kTransfers; ++k) {
    const std::vector<int32_t> v = values_of(k);
    Tensor t = Tensor::empty(DType::Int32, {static_cast<int64_t>(v.size())}, g);
    g->copy_from_host(v.data(), t.raw_data(), t.nbytes());
    const DevicePayloadTicket ticket = payloads->send(1, key_of(k), t);
    tickets << ticket.link << " " << ticket.sequence << "\n";
  }
  const std::string path = std::string(dir) + "/tickets";
  std::ofstream(path + ".part") << tickets.str();
  std::rename((path + ".part").c_str(), path.c_str());
  EXPECT_TRUE(wait_for_file(std::string(dir) + "/received", 60s)) << "the receiver never finished";
  EXPECT_EQ(failed, "");
}

TEST(NcclP2pChild, Receiver) {
  const char* dir = std::getenv(kChildDir);
  if (!dir) GTEST_SKIP() << "run by NcclP2p.TensorsCrossBetweenTwoProcesses";
  set_local_task("worker", 1);
  Device* g = gpu();
  ASSERT_NE(g, nullptr);
  auto payloads = make_nccl_payloads();
  ASSERT_NE(payloads, nullptr);
  payloads->set_failure_handler([](std::exception_ptr e) { ADD_FAILURE() << what_of(e); });
  ASSERT_TRUE(wait_for_file(std::string(dir) + "/tickets", 60s)) << "the sender wrote no tickets";
  std::ifstream in(std::string(dir) + "/tickets");
  std::vector<DevicePayloadTicket> tickets;
  for (DevicePayloadTicket t; in >> t.link >> t.sequence;) tickets.push_back(t);
  ASSERT_EQ(tickets.size(), static_cast<size_t>(kTransfers));
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, Tensor> got;
  for (int k = kTransfers - 1; k >= 0; --k) {  // the last first: the link takes them in turn
    const auto n = static_cast<int64_t>(values_of(k).size());
    payloads->recv(0, key_of(k), DType::Int32, {n}, tickets[static_cast<size_t>(k)], [&, k](Tensor t) {
      std::lock_guard<std::mutex> lock(mu);
      got[k] = std::move(t);
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return got.size() == static_cast<size_t>(kTransfers); }))
        << got.size() << " of " << kTransfers << " transfers arrived";
  }
  for (int k = 0; k < kTransfers; ++k) {
    std::vector<int32_t> back(values_of(k).size());
    ASSERT_EQ(got[k].device(), g->name());
    g->copy_to_host(got[k].raw_data(), back.data(), got[k].nbytes());
    EXPECT_EQ(back, values_of(k)) << "transfer " << k;
  }
  std::ofstream(std::string(dir) + "/received") << "ok\n";
}

pid_t spawn_child(const std::string& test, const std::string& dir, int visible_gpu) {
  const std::string env_dir = std::string(kChildDir) + "=" + dir;
  const std::string env_gpu = "CUDA_VISIBLE_DEVICES=" + std::to_string(visible_gpu);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env_dir.c_str()));
  envp.push_back(const_cast<char*>(env_gpu.c_str()));
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=NcclP2pChild." + test;
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

TEST(NcclP2p, TensorsCrossBetweenTwoProcesses) {
  WEFT_REQUIRE_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs (NCCL refuses two ranks on one GPU); this machine has " << gpu_count();
  char pattern[] = "/tmp/weft_nccl_p2p_XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const pid_t sender = spawn_child("Sender", dir, 0);
  const pid_t receiver = spawn_child("Receiver", dir, 1);
  ASSERT_GT(sender, 0);
  ASSERT_GT(receiver, 0);
  for (pid_t p : {sender, receiver}) {
    int status = 0;
    waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (p == sender ? "sender" : "receiver") << " status " << status;
  }
  for (const char* f : {"/tickets", "/received"}) std::remove((dir + f).c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace weft::gpu_test
