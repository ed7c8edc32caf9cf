#include "comm/nccl/nccl_p2p.h"

#include <cstdlib>
#include <string_view>

#include "runtime/device.h"

#ifdef WEFT_WITH_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/device_name.h"
#include "runtime/error.h"

namespace weft {

namespace {

using Clock = std::chrono::steady_clock;

// Naps of the watchdog: short while transfers are in flight (their completion is the latency of a
// tensor between tasks), longer while links are only coming up.
constexpr auto kInFlightNap = std::chrono::microseconds(50);
constexpr auto kInitNap = std::chrono::milliseconds(1);

class NcclPayloads final : public DevicePayloads {
 public:
  explicit NcclPayloads(std::chrono::milliseconds init_timeout)
      : init_timeout_(init_timeout), watchdog_([this] { watch(); }) {}

  ~NcclPayloads() override {
    abort(std::make_exception_ptr(FailedPrecondition("[nccl] the NCCL rendezvous was shut down")));
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    // The links were aborted, so their kernels return: wait for them before the buffers go.
    for (auto& op : zombies_) ignore_cuda_error(cudaEventSynchronize(op->finished));
  }

  void set_failure_handler(Failure on_failure) override {
    std::lock_guard<std::mutex> lock(mu_);
    on_failure_ = std::move(on_failure);
  }

  bool carries(const RendezvousKey& key, const Tensor& value) const override {
    if (!value.defined() || value.nbytes() == 0 || !value.device_ptr() ||
        value.device_ptr()->type() != DeviceType::CUDA)
      return false;
    try {
      const DeviceSpec dst = DeviceSpec::parse(key.dst_device);
      return dst.type == DeviceType::CUDA;
    } catch (const Error&) {
      return false;
    }
  }

  DevicePayloadTicket send(int peer, const RendezvousKey& key, Tensor value) override {
    Device& gpu = *value.device_ptr();
    CudaContext& cu = cuda_context(gpu);
    // Everything that can fail comes before the ticket: a ticket given is a transfer issued.
    std::shared_ptr<Op> op = new_op(cu, std::move(value));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) std::rethrow_exception(aborted_);
      const auto where = std::make_tuple(peer, cu.device, key.dst_device);
      auto it = sending_.find(where);
      if (it == sending_.end())
        it = sending_.emplace(where, open_link(LinkEnds{true, peer, cu.device, key.src_device, key.dst_device},
                                               new_nccl_id())).first;
      const std::shared_ptr<Link>& link = it->second;
      op->link = link;
      op->sequence = link->next_sequence++;
      ops_.push_back(op);
    }
    cv_.notify_all();
    submit(op);
    return {op->link->id, op->sequence};
  }

  void recv(int peer, const RendezvousKey& key, DType dtype, const Shape& shape, const DevicePayloadTicket& ticket,
            Arrived arrived) override {
    decode_nccl_id(ticket.link, "nccl rendezvous");  // InvalidArgument for what cannot be an id
    Device* gpu = find_device(key.dst_device);
    if (!gpu || gpu->type() != DeviceType::CUDA)
      throw InvalidArgument("[nccl] key " + key.to_string() + " comes to " + key.dst_device +
                            ", which is not a GPU of this task");
    CudaContext& cu = cuda_context(*gpu);
    // Allocated on the compute stream; the receive waits for that point of it.
    std::shared_ptr<Op> op = new_op(cu, Tensor::empty(dtype, shape, gpu));
    op->arrived = std::move(arrived);
    op->sequence = ticket.sequence;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) std::rethrow_exception(aborted_);
      auto it = receiving_.find({peer, ticket.link});
      if (it == receiving_.end())
        it = receiving_.emplace(std::make_pair(peer, ticket.link),
                                open_link(LinkEnds{false, peer, cu.device, key.dst_device, key.src_device}, ticket.link))
                 .first;
      const std::shared_ptr<Link>& link = it->second;
      if (link->ends.device != cu.device || link->ends.remote_device != key.src_device)
        throw InvalidArgument("[nccl] key " + key.to_string() + " names link " + ticket.link.substr(0, 16) +
                              "..., which goes from " + link->ends.remote_device + " to GPU " +
                              std::to_string(link->ends.device) + " here");
      op->link = link;
      ops_.push_back(op);
    }
    cv_.notify_all();
    submit(op);
  }

  void abort(std::exception_ptr error) override {
    std::vector<std::shared_ptr<Link>> links;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      aborted_ = error;
      for (auto& [k, l] : sending_) links.push_back(l);
      for (auto& [k, l] : receiving_) links.push_back(l);
      for (auto& op : ops_) {
        if (op->state == OpState::kLaunching || op->state == OpState::kInFlight) zombies_.push_back(op);
        op->state = OpState::kDone;  // never handed on: a poll under way skips it
      }
      ops_.clear();
      for (auto& l : links) l->state = LinkState::kAborted;
    }
    for (auto& l : links) {
      l->queue.fail_all(error);
      std::lock_guard<std::mutex> nccl_lock(l->nccl_mu);
      if (l->comm) ncclCommAbort(l->comm);  // its kernels return, so the zombies' events complete
      l->comm = nullptr;
    }
    cv_.notify_all();
  }

 private:
  enum class LinkState { kInitializing, kReady, kAborted };
  enum class OpState { kQueued, kLaunching, kInFlight, kDone };

  struct LinkEnds {
    bool sender = false;       // NCCL rank 0 sends, rank 1 receives
    int peer = 0;              // the other task's rank
    int device = 0;            // CUDA ordinal here
    std::string local_device;  // full names, for messages
    std::string remote_device;
  };

  struct Link {
    LinkEnds ends;
    std::string id;            // the unique id, hex: the tickets' link
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    std::mutex nccl_mu;        // one NCCL call on `comm` at a time
    LinkState state = LinkState::kInitializing;  // guarded by mu_
    Clock::time_point deadline;
    uint64_t next_sequence = 0;                  // a sender's next ticket, guarded by mu_
    BasicIssueQueue<SequenceOrder> queue;
    std::string describe() const {
      const std::string from = ends.sender ? ends.local_device : ends.remote_device;
      const std::string to = ends.sender ? ends.remote_device : ends.local_device;
      return "NCCL link from " + from + " to " + to + " (peer rank " + std::to_string(ends.peer) + ")";
    }
    ~Link() {
      if (stream) ignore_cuda_error(cudaStreamDestroy(stream));
    }
  };

  struct Op {
    std::shared_ptr<Link> link;
    uint64_t sequence = 0;
    Tensor value;
    Arrived arrived;                  // null for a send
    cudaEvent_t ready = nullptr;      // on the compute stream: the tensor is made (or allocated)
    cudaEvent_t finished = nullptr;   // on the link's stream after the transfer
    OpState state = OpState::kQueued;  // guarded by mu_
    ~Op() {
      if (ready) ignore_cuda_error(cudaEventDestroy(ready));
      if (finished) ignore_cuda_error(cudaEventDestroy(finished));
    }
  };

  // A transfer of `value`, made (or allocated) on `cu`'s compute stream: its events, and the
  // point of that stream its link's stream will wait for.
  static std::shared_ptr<Op> new_op(const CudaContext& cu, Tensor value) {
    auto op = std::make_shared<Op>();
    op->value = std::move(value);
    check_cuda(cudaSetDevice(cu.device), "cudaSetDevice");
    op->ready = new_nccl_event();
    op->finished = new_nccl_event();
    check_cuda(cudaEventRecord(op->ready, cu.stream), "cudaEventRecord(compute -> nccl link)");
    return op;
  }

  // Creates the communicator of a new link (non-blocking); mu_ is held. A failure to even start is
  // Unavailable, thrown before any ticket names the link.
  std::shared_ptr<Link> open_link(LinkEnds ends, std::string id_hex) {
    auto link = std::make_shared<Link>();
    link->ends = std::move(ends);
    link->id = std::move(id_hex);
    link->deadline = Clock::now() + init_timeout_;
    const NcclIdBytes bytes = decode_nccl_id(link->id, "nccl rendezvous");
    ncclUniqueId id;
    std::memcpy(id.internal, bytes.data(), kNcclIdBytes);
    check_cuda(cudaSetDevice(link->ends.device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&link->stream, cudaStreamNonBlocking), "cudaStreamCreate(nccl link)");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&link->comm, 2, id, link->ends.sender ? 0 : 1, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string why = nccl_message(r, link->comm);
      if (link->comm) ncclCommAbort(link->comm);
      link->comm = nullptr;
      throw Unavailable("[nccl] the " + link->describe() + " could not be created: " + why);
    }
    return link;
  }

  void submit(const std::shared_ptr<Op>& op) {
    std::weak_ptr<Op> weak = op;
    try {
      op->link->queue.submit(
          SequenceNumber{op->sequence}, [this, op] { return issue(*op); },
          [this, weak](std::exception_ptr error) {
            if (weak.lock()) report(error);
          });
    } catch (const FailedPrecondition& e) {
      // A sequence number already taken (a receiver's peer sent it twice) or an aborted link.
      if (!op->arrived) return report(std::current_exception());
      throw InvalidArgument(std::string(e.what()));
    }
  }

  // Launches `op` on its link; true when the launch is complete (the queue's contract).
  bool issue(Op& op) {
    Link& l = *op.link;
    std::lock_guard<std::mutex> nccl_lock(l.nccl_mu);
    if (!l.comm) throw FailedPrecondition("[nccl] the " + l.describe() + " was aborted");
    check_cuda(cudaSetDevice(l.ends.device), "cudaSetDevice");
    check_cuda(cudaStreamWaitEvent(l.stream, op.ready, 0), "cudaStreamWaitEvent(nccl link waits for compute)");
    const ncclResult_t r = l.ends.sender
                               ? ncclSend(op.value.raw_data(), op.value.nbytes(), ncclUint8, 1, l.comm, l.stream)
                               : ncclRecv(op.value.raw_data(), op.value.nbytes(), ncclUint8, 0, l.comm, l.stream);
    if (r != ncclSuccess && r != ncclInProgress)
      throw Unavailable("[nccl] the " + l.describe() + ": " + (l.ends.sender ? "ncclSend" : "ncclRecv") +
                        " failed: " + nccl_message(r, l.comm));
    if (r == ncclInProgress) {
      std::lock_guard<std::mutex> lock(mu_);
      if (op.state == OpState::kQueued) op.state = OpState::kLaunching;  // the watchdog finishes it
      return false;
    }
    finish_launch(op);
    return true;
  }

  void finish_launch(Op& op) {
    check_cuda(cudaSetDevice(op.link->ends.device), "cudaSetDevice");
    check_cuda(cudaEventRecord(op.finished, op.link->stream), "cudaEventRecord(nccl link)");
    std::lock_guard<std::mutex> lock(mu_);
    if (op.state != OpState::kDone) op.state = OpState::kInFlight;
  }

  // A link broke: the rendezvous aborts (and aborts this transport); without a handler, abort here.
  void report(std::exception_ptr error) {
    Failure handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      handler = on_failure_;
    }
    if (handler) handler(error);
    abort(error);
  }

  std::exception_ptr unavailable(const Link& l, const std::string& why) {
    return std::make_exception_ptr(Unavailable("[nccl] the " + l.describe() + ": " + why));
  }

  // One look at everything pending; returns the nap before the next, or nothing when idle.
  std::optional<Clock::duration> poll() {
    std::vector<std::shared_ptr<Link>> initializing;
    std::vector<std::shared_ptr<Op>> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [k, l] : sending_)
        if (l->state == LinkState::kInitializing) initializing.push_back(l);
      for (auto& [k, l] : receiving_)
        if (l->state == LinkState::kInitializing) initializing.push_back(l);
      pending = ops_;
      std::erase_if(zombies_, [](const std::shared_ptr<Op>& z) { return cudaEventQuery(z->finished) != cudaErrorNotReady; });
      cudaGetLastError();
    }
    for (auto& l : initializing) {
      ncclResult_t r;
      {
        std::lock_guard<std::mutex> nccl_lock(l->nccl_mu);
        if (!l->comm || ncclCommGetAsyncError(l->comm, &r) != ncclSuccess) r = ncclInternalError;
      }
      if (r == ncclSuccess) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (l->state == LinkState::kInitializing) l->state = LinkState::kReady;
        }
        l->queue.open();
      } else if (r != ncclInProgress) {
        report(unavailable(*l, "creating its communicator failed: " + nccl_message(r, nullptr)));
      } else if (Clock::now() > l->deadline) {
        report(unavailable(*l, "the peer did not join within " + std::to_string(init_timeout_.count()) +
                                   " ms (it is missing or failed)"));
      }
    }
    bool in_flight = false;
    for (auto& op : pending) {
      OpState state;
      {
        std::lock_guard<std::mutex> lock(mu_);
        state = op->state;
      }
      if (state == OpState::kQueued || state == OpState::kDone) continue;
      in_flight = true;
      ncclResult_t r = ncclSuccess;
      {
        std::lock_guard<std::mutex> nccl_lock(op->link->nccl_mu);
        if (!op->link->comm || ncclCommGetAsyncError(op->link->comm, &r) != ncclSuccess) r = ncclInternalError;
      }
      if (r != ncclSuccess && r != ncclInProgress) {
        report(unavailable(*op->link, "NCCL error: " + nccl_message(r, nullptr)));
        continue;
      }
      if (state == OpState::kLaunching) {
        if (r != ncclSuccess) continue;
        try {
          finish_launch(*op);
        } catch (...) {
          report(std::current_exception());
          continue;
        }
        op->link->queue.open();
        continue;
      }
      const cudaError_t q = cudaEventQuery(op->finished);
      if (q == cudaErrorNotReady) continue;
      if (q != cudaSuccess) {
        cudaGetLastError();
        report(unavailable(*op->link, std::string("waiting for a transfer failed: ") + cudaGetErrorString(q)));
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (op->state == OpState::kDone) continue;  // aborted meanwhile
        op->state = OpState::kDone;
        std::erase(ops_, op);
      }
      if (op->arrived) op->arrived(std::move(op->value));
      op->value = Tensor();  // a sent buffer is free once the transfer completed
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight || !zombies_.empty()) return Clock::duration(kInFlightNap);
    if (!initializing.empty() || !ops_.empty()) return Clock::duration(kInitNap);
    return std::nullopt;
  }

  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      std::optional<Clock::duration> nap = kInitNap;
      try {
        nap = poll();
      } catch (...) {
        // a CUDA call of the poll failed; the next poll tries again
      }
      lock.lock();
      if (stopping_) break;
      if (nap) cv_.wait_for(lock, *nap);
      else cv_.wait(lock, [&] { return stopping_ || !ops_.empty(); });
    }
  }

  const std::chrono::milliseconds init_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::exception_ptr aborted_;
  Failure on_failure_;
  std::map<std::tuple<int, int, std::string>, std::shared_ptr<Link>> sending_;  // (peer, GPU, remote GPU)
  std::map<std::pair<int, std::string>, std::shared_ptr<Link>> receiving_;      // (peer, id)
  std::vector<std::shared_ptr<Op>> ops_;      // not yet complete
  std::vector<std::shared_ptr<Op>> zombies_;  // in flight at an abort: kept until their event completes
  std::thread watchdog_;                      // last: starts when the rest is made
};

}  // namespace

std::unique_ptr<DevicePayloads> make_nccl_payloads(std::chrono::milliseconds init_timeout) {
  if (const char* v = std::getenv("WEFT_NCCL_RENDEZVOUS"); v && std::string_view(v) == "0") return nullptr;
  bool has_gpu = false;
  for (Device* d : local_devices()) has_gpu |= d->type() == DeviceType::CUDA;
  if (!has_gpu) return nullptr;
  return std::make_unique<NcclPayloads>(init_timeout);
}

}  // namespace weft

#else

namespace weft {

std::unique_ptr<DevicePayloads> make_nccl_payloads(std::chrono::milliseconds) { return nullptr; }

}  // namespace weft

#endif
