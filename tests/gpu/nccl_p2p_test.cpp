// The NCCL rendezvous's transport (comm/nccl/nccl_p2p.h). In one process: tickets number a
// link's transfers, bad tickets and keys are InvalidArgument, and a peer that never joins fails
// the link within its timeout, through the failure handler. Between two processes (this binary,
// run again as children: child_processes.h, one GPU each, or one GPU as two hosts): tensors move
// GPU to GPU, the receiver taking its tickets in the reverse order, and arrive with the sender's
// bytes.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "child_processes.h"
#include "comm/nccl/nccl_p2p.h"
#include "gpu_test_util.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kChildDir = "WEFT_NCCL_P2P_TEST_DIR";
constexpr int kTransfers = 6;

std::string gpu_of_task(int task) { return "/job:worker/replica:0/task:" + std::to_string(task) + "/device:GPU:0"; }

RendezvousKey key_of(int k) { return {gpu_of_task(0), 0x1234, gpu_of_task(1), "t" + std::to_string(k) + ":0", 1}; }

// Transfer k: (1000 * k + 3) int32 values k * 1000003 + i.
std::vector<int32_t> values_of(int k) {
  std::vector<int32_t> v(static_cast<size_t>(1000 * k + 3));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(k * 1000003 + static_cast<int32_t>(i));
  return v;
}

TEST(NcclP2p, TicketsNumberALinksTransfersAndALinkWithoutItsPeerFailsInTime) {
  WEFT_REQUIRE_GPU();
  auto payloads = make_nccl_payloads(std::chrono::milliseconds(3000));
  ASSERT_NE(payloads, nullptr) << "a process with a GPU and NCCL has the transport";
  std::promise<std::string> failure;
  payloads->set_failure_handler([&](std::exception_ptr e) { failure.set_value(message_of(e)); });
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

// ---- two processes ----

// Run only as children of TensorsCrossBetweenTwoProcesses, on the GPU CUDA_VISIBLE_DEVICES leaves.
TEST(NcclP2pChild, Sender) {
  const char* dir = std::getenv(kChildDir);
  if (!dir) GTEST_SKIP() << "run by NcclP2p.TensorsCrossBetweenTwoProcesses";
  set_local_task("worker", 0);
  Device* g = gpu();
  ASSERT_NE(g, nullptr);
  auto payloads = make_nccl_payloads();
  ASSERT_NE(payloads, nullptr);
  std::string failed;
  payloads->set_failure_handler([&](std::exception_ptr e) { failed = message_of(e); });
  std::ostringstream tickets;
  for (int k = 0; k < kTransfers; ++k) {
    const std::vector<int32_t> v = values_of(k);
    Tensor t = Tensor::empty(DType::Int32, {static_cast<int64_t>(v.size())}, g);
    g->copy_from_host(v.data(), raw_data(t), t.nbytes());
    const DevicePayloadTicket ticket = payloads->send(1, key_of(k), t);
    tickets << ticket.link << " " << ticket.sequence << "\n";
  }
  write_file_whole(std::string(dir) + "/tickets", tickets.str());
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
  payloads->set_failure_handler([](std::exception_ptr e) { ADD_FAILURE() << message_of(e); });
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
    g->copy_to_host(raw_data(got[k]), back.data(), got[k].nbytes());
    EXPECT_EQ(back, values_of(k)) << "transfer " << k;
  }
  write_file_whole(std::string(dir) + "/received", "ok\n");
}

TEST(NcclP2p, TensorsCrossBetweenTwoProcesses) {
  WEFT_REQUIRE_GPU();
  TempDir dir("weft_gpu_children");
  const std::string meet = std::string(kChildDir) + "=" + dir.path();
  std::vector<std::string> sender_env = nccl_rank_environment(0), receiver_env = nccl_rank_environment(1);
  sender_env.push_back(meet);
  receiver_env.push_back(meet);
  const pid_t sender = spawn_test_child("NcclP2pChild.Sender", sender_env);
  const pid_t receiver = spawn_test_child("NcclP2pChild.Receiver", receiver_env);
  ASSERT_GT(sender, 0);
  ASSERT_GT(receiver, 0);
  EXPECT_EQ(wait_test_child(sender, 120s), "") << "the sender";
  EXPECT_EQ(wait_test_child(receiver, 120s), "") << "the receiver";
}

}  // namespace
}  // namespace weft::gpu_test
