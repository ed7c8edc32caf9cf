// The MPI rendezvous with a device transport (comm/device_payloads.h), on machines without GPUs: a
// stand-in transport carries the keys whose edge starts with "dev" and, like NCCL, matches its
// transfers by the ORDER each side issues them (every payload goes on one MPI tag of its own
// communicator). So a receiver that issued its receives in header order rather than ticket order
// would get the wrong bytes or a truncation, and the tests would see it. They check: the tensors
// cross whatever order headers arrive in; a ticket the transport refuses and a failure of the
// transport fail every recv, naming the peer or the cause; keys the transport does not carry still
// go over MPI; takes_device_tensor says which sends it takes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/device_payloads.h"
#include "comm/mpi_rendezvous.h"
#include "mpi_rendezvous_fixture.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

// Sequence-matched payloads over MPI; links are "fake:<from>-><to>".
class OrderedMpiPayloads final : public DevicePayloads {
 public:
  explicit OrderedMpiPayloads(MPI_Comm world) {
    MPI_Comm_dup(world, &comm_);
    MPI_Comm_rank(comm_, &me_);
    thread_ = std::thread([this] { run(); });
  }
  ~OrderedMpiPayloads() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    thread_.join();
    for (Op& op : ops_) {
      MPI_Cancel(&op.request);
      MPI_Wait(&op.request, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&comm_);
  }

  void set_failure_handler(Failure on_failure) override { on_failure_ = std::move(on_failure); }
  bool carries(const RendezvousKey& key, const Tensor& value) const override {
    return key.edge_name.starts_with("dev") && value.nbytes() > 0;
  }

  DevicePayloadTicket send(int peer, const RendezvousKey& key, Tensor value) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) std::rethrow_exception(aborted_);
    DevicePayloadTicket ticket{"fake:" + std::to_string(me_) + "->" + std::to_string(peer), next_send_[peer]++};
    Op op{MPI_REQUEST_NULL, value, {}};
    MPI_Isend(raw_data(value), static_cast<int>(value.nbytes()), MPI_BYTE, peer, 0, comm_, &op.request);
    ops_.push_back(std::move(op));
    if (key.edge_name.starts_with("dev_badlink")) ticket.link = "fake:nobody";
    if (key.edge_name.starts_with("dev_late")) {
      // This header leaves after the next transfer's: the receiver must still take them in turn.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return ticket;
  }

  void recv(int peer, const RendezvousKey& key, DType dtype, const Shape& shape, const DevicePayloadTicket& ticket,
            Arrived arrived) override {
    (void)key;
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) std::rethrow_exception(aborted_);
    if (ticket.link != "fake:" + std::to_string(peer) + "->" + std::to_string(me_))
      throw InvalidArgument("link " + ticket.link + " is not from rank " + std::to_string(peer));
    Incoming& in = incoming_[peer];
    in.waiting[ticket.sequence] = {Tensor::empty(dtype, shape), std::move(arrived)};
    // Issued in ticket order only: MPI then matches them with the peer's sends, as NCCL would.
    while (in.waiting.count(in.next)) {
      auto node = in.waiting.extract(in.next++);
      Op op{MPI_REQUEST_NULL, node.mapped().first, std::move(node.mapped().second)};
      MPI_Irecv(raw_data(op.value), static_cast<int>(op.value.nbytes()), MPI_BYTE, peer, 0, comm_, &op.request);
      ops_.push_back(std::move(op));
    }
  }

  void abort(std::exception_ptr error) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) aborted_ = error;
    ++aborts;
  }

  // What a broken link reports.
  void fail(const std::string& why) { on_failure_(std::make_exception_ptr(Unavailable(why))); }

  std::atomic<int> aborts{0};

 private:
  struct Op {
    MPI_Request request;
    Tensor value;
    Arrived arrived;  // null for a send
  };
  struct Incoming {
    uint64_t next = 0;
    std::map<uint64_t, std::pair<Tensor, Arrived>> waiting;
  };

  void run() {
    while (true) {
      std::vector<Op> finished;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        for (auto it = ops_.begin(); it != ops_.end();) {
          int flag = 0;
          MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE);
          if (flag) {
            finished.push_back(std::move(*it));
            it = ops_.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (Op& op : finished)
        if (op.arrived) op.arrived(std::move(op.value));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int me_ = 0;
  Failure on_failure_;
  std::mutex mu_;
  bool stop_ = false;
  std::exception_ptr aborted_;
  std::map<int, uint64_t> next_send_;
  std::map<int, Incoming> incoming_;
  std::vector<Op> ops_;
  std::thread thread_;
};

class DevicePayloadsTest : public MpiRendezvousTest {
 protected:
  std::unique_ptr<MpiRendezvous> make_with_payloads() {
    auto payloads = std::make_unique<OrderedMpiPayloads>(comm_);
    payloads_ = payloads.get();
    MpiRendezvousOptions options;
    options.device_payloads = std::move(payloads);
    return make(std::move(options));
  }
  OrderedMpiPayloads* payloads_ = nullptr;  // owned by the rendezvous
};

TEST_F(DevicePayloadsTest, TensorsCrossInTicketOrderWhateverOrderTheirHeadersCome) {
  auto rdv = make_with_payloads();
  const int to = (me_ + 1) % size_, from = (me_ + size_ - 1) % size_;
  // Two threads send at once, one of them with a header held back: the receiver sees headers out
  // of ticket order. Sizes differ, so a receive issued out of turn would be truncated or wrong.
  constexpr int kPerThread = 20;
  std::vector<std::unique_ptr<Pending>> pending;
  for (int k = 0; k < 2 * kPerThread + 1; ++k) {
    pending.push_back(std::make_unique<Pending>());
    const std::string edge = k == 0 ? "dev_late:0" : "dev" + std::to_string(k) + ":0";
    rdv->recv_async(key(from, me_, edge), pending.back()->callback());
  }
  sync();
  std::thread late([&] { rdv->send(key(me_, to, "dev_late:0"), make_tensor(DType::Float32, {7}, me_, to, 0)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the late one has its ticket: 0
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int k = 1 + t * kPerThread + i;
        rdv->send(key(me_, to, "dev" + std::to_string(k) + ":0"), make_tensor(DType::Int32, {k * 3}, me_, to, k));
      }
    });
  late.join();
  for (auto& s : senders) s.join();
  for (int k = 0; k < static_cast<int>(pending.size()); ++k) {
    ASSERT_TRUE(pending[k]->wait()) << "recv " << k << " never completed";
    ASSERT_FALSE(pending[k]->error) << message_of(pending[k]->error);
    expect_same(pending[k]->value,
                k == 0 ? make_tensor(DType::Float32, {7}, from, me_, 0) : make_tensor(DType::Int32, {k * 3}, from, me_, k),
                "recv " + std::to_string(k));
  }
}

TEST_F(DevicePayloadsTest, KeysTheTransportDoesNotCarryGoOverMpi) {
  auto rdv = make_with_payloads();
  const int to = (me_ + 1) % size_, from = (me_ + size_ - 1) % size_;
  EXPECT_TRUE(rdv->takes_device_tensor(key(me_, to, "dev:0"), make_tensor(DType::Float32, {2}, me_, to, 0)));
  EXPECT_FALSE(rdv->takes_device_tensor(key(me_, to, "host:0"), make_tensor(DType::Float32, {2}, me_, to, 0)));
  EXPECT_FALSE(rdv->takes_device_tensor(key(me_, me_, "dev:0", 1, 0, 1), make_tensor(DType::Float32, {2}, me_, me_, 0)))
      << "a key within the rank meets in the rank";
  // On a communicator of its own: a second rendezvous on comm_ would take rdv's headers.
  MPI_Comm other;
  MPI_Comm_dup(comm_, &other);
  {
    const int size = size_;
    MpiRendezvous plain(other, [size](std::string_view d) { return rank_of(d, size); });
    EXPECT_FALSE(plain.takes_device_tensor(key(me_, to, "dev:0"), make_tensor(DType::Float32, {2}, me_, to, 0)))
        << "a rendezvous without a transport takes host tensors only";
  }
  MPI_Comm_free(&other);
  rdv->send(key(me_, to, "host:0"), make_tensor(DType::Float32, {5}, me_, to, 1));
  rdv->send(key(me_, to, "dev_empty:0"), make_tensor(DType::Float32, {0}, me_, to, 2));  // no bytes: MPI
  rdv->send(key(me_, to, "dev:1"), make_tensor(DType::Float32, {5}, me_, to, 3), /*is_dead=*/true);
  expect_same(rdv->recv(key(from, me_, "host:0"), kWait).value, make_tensor(DType::Float32, {5}, from, me_, 1), "host");
  expect_same(rdv->recv(key(from, me_, "dev_empty:0"), kWait).value, make_tensor(DType::Float32, {0}, from, me_, 2),
              "empty");
  Rendezvous::Received dead = rdv->recv(key(from, me_, "dev:1"), kWait);
  EXPECT_TRUE(dead.is_dead) << "a dead tensor's flag travels in its header";
  expect_same(dead.value, make_tensor(DType::Float32, {5}, from, me_, 3), "dead");
  EXPECT_EQ(payloads_->aborts.load(), 0);
}

TEST_F(DevicePayloadsTest, ATicketTheTransportRefusesFailsEveryRecvNamingTheSender) {
  auto rdv = make_with_payloads();
  // Rank 0 sends rank 1 a ticket for a link that is not its own; rank 1 fails as a whole.
  Pending waiting;
  if (me_ == 1) rdv->recv_async(key(0, 1, "other:0"), waiting.callback());
  sync();
  if (me_ == 0) rdv->send(key(0, 1, "dev_badlink:0"), make_tensor(DType::Float32, {3}, 0, 1, 0));
  if (me_ == 1) {
    ASSERT_TRUE(waiting.wait());
    const std::string e = message_of(waiting.error);
    EXPECT_NE(e.find("rank 0 sent key"), std::string::npos) << e;
    EXPECT_NE(e.find("link fake:nobody is not from rank 0"), std::string::npos) << e;
    EXPECT_GE(payloads_->aborts.load(), 1) << "the transport's links are aborted with the rendezvous";
  }
  sync();
}

TEST_F(DevicePayloadsTest, AFailedLinkFailsTheRendezvousAndLaterSends) {
  auto rdv = make_with_payloads();
  const int to = (me_ + 1) % size_, from = (me_ + size_ - 1) % size_;
  Pending waiting;
  rdv->recv_async(key(from, me_, "dev:0"), waiting.callback());
  payloads_->fail("NCCL error on the link to rank " + std::to_string(to));
  ASSERT_TRUE(waiting.wait());
  EXPECT_NE(message_of(waiting.error).find("NCCL error on the link"), std::string::npos) << message_of(waiting.error);
  EXPECT_THROW(rdv->send(key(me_, to, "dev:1"), make_tensor(DType::Float32, {3}, me_, to, 0)), Unavailable);
  sync();
}

}  // namespace
}  // namespace weft
