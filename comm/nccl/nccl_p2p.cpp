#include "comm/nccl/nccl_p2p.h"

#include <cstdlib>
#include <string_view>

#include "runtime/device.h"

#ifdef WEFT_WITH_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"
#include "comm/nccl/nccl_watchdog.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/device_name.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

class NcclPayloads final : public DevicePayloads {
 public:
  explicit NcclPayloads(std::chrono::milliseconds init_timeout)
      : watchdog_(init_timeout, [this](const std::shared_ptr<NcclChannel>&, std::exception_ptr e) { report(e); }) {}

  ~NcclPayloads() override {
    abort(std::make_exception_ptr(FailedPrecondition("[nccl] the NCCL rendezvous was shut down")));
    watchdog_.stop();
    // The links were aborted, so their kernels return: wait for them before the buffers go.
    watchdog_.wait_for_zombies();
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
    // Before `ready`, on this thread: a pending eager value is computed here, queued before it.
    void* data = raw_data(value);
    // Everything that can fail comes before the ticket: a ticket given is a transfer issued.
    NcclEvents events = events_after_compute(cu);
    std::shared_ptr<Op> op;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) std::rethrow_exception(aborted_);
      const auto where = std::make_tuple(peer, cu.device, key.dst_device);
      auto it = sending_.find(where);
      if (it == sending_.end())
        it = sending_.emplace(where, open_link(LinkEnds{true, peer, cu.device, key.src_device, key.dst_device},
                                               new_nccl_id())).first;
      const std::shared_ptr<Link>& link = it->second;
      op = std::make_shared<Op>(link, std::move(value), data, std::move(events));
      op->sequence = link->next_sequence++;
      watchdog_.watch(op);
    }
    submit(op);
    return {op->link().id, op->sequence};
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
    Tensor value = Tensor::empty(dtype, shape, gpu);
    void* data = raw_data(value);
    NcclEvents events = events_after_compute(cu);
    std::shared_ptr<Op> op;
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
      op = std::make_shared<Op>(link, std::move(value), data, std::move(events));
      op->arrived = std::move(arrived);
      op->sequence = ticket.sequence;
      watchdog_.watch(op);
    }
    submit(op);
  }

  void abort(std::exception_ptr error) override {
    std::vector<std::shared_ptr<NcclChannel>> links;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      aborted_ = error;
      for (auto& [k, l] : sending_) links.push_back(l);
      for (auto& [k, l] : receiving_) links.push_back(l);
    }
    // Each link's queue fails, its communicator is aborted (its kernels return), and transfers in
    // flight stay as the watchdog's zombies until their events complete.
    watchdog_.abort(links, error);
  }

 private:
  struct LinkEnds {
    bool sender = false;       // NCCL rank 0 sends, rank 1 receives
    int peer = 0;              // the other task's rank
    int device = 0;            // CUDA ordinal here
    std::string local_device;  // full names, for messages
    std::string remote_device;
  };

  struct Link final : NcclChannel {
    LinkEnds ends;
    std::string id;            // the unique id, hex: the tickets' link
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    std::mutex nccl_mu;        // one NCCL call on `comm` at a time
    uint64_t next_sequence = 0;  // a sender's next ticket, guarded by NcclPayloads::mu_
    BasicIssueQueue<SequenceOrder> queue;

    std::string describe() const {
      const std::string from = ends.sender ? ends.local_device : ends.remote_device;
      const std::string to = ends.sender ? ends.remote_device : ends.local_device;
      return "NCCL link from " + from + " to " + to + " (peer rank " + std::to_string(ends.peer) + ")";
    }
    NcclPoll poll_comm() override {
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      return poll_nccl_comm(comm);
    }
    void open() override { queue.open(); }
    void abort(std::exception_ptr error) override {
      queue.fail_all(error);
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      if (comm) ncclCommAbort(comm);  // its kernels return, so the zombies' events complete
      comm = nullptr;
    }
    std::exception_ptr error(const std::string& why) const override {
      return std::make_exception_ptr(Unavailable("[nccl] the " + describe() + ": " + why));
    }
    ~Link() override {
      if (stream) ignore_cuda_error(cudaStreamDestroy(stream));
    }
  };

  // One transfer. A failed one is never handed on: the rendezvous heard of the failure through
  // its handler (report), and aborts every transfer of the step.
  struct Op final : NcclLaunch {
    Op(std::shared_ptr<Link> l, Tensor v, void* d, NcclEvents e)
        : NcclLaunch(std::move(l)), value(std::move(v)), data(d), events(std::move(e)) {}
    Link& link() const { return static_cast<Link&>(*channel()); }
    uint64_t sequence = 0;
    Tensor value;
    void* data;          // value's memory, taken where the transfer was asked for
    Arrived arrived;     // null for a send
    NcclEvents events;   // ready: on the compute stream, the tensor is made (or allocated)

    NcclPoll poll_completion() override { return poll_nccl_event(events.finished); }
    void finish_launch() override {
      check_cuda(cudaSetDevice(link().ends.device), "cudaSetDevice");
      check_cuda(cudaEventRecord(events.finished, link().stream), "cudaEventRecord(nccl link)");
    }
    // Aborted while NCCL may have queued its kernel: the event covers it (the tensor stays with
    // the zombie until it fires; the link's stream is its own). Never throws: without an event,
    // waits.
    void abandoned() override {
      try {
        finish_launch();
      } catch (...) {
        ignore_cuda_error(cudaStreamSynchronize(link().stream));
      }
    }
    void complete() override {
      if (arrived) arrived(std::move(value));
      value = Tensor();  // a sent buffer is free once the transfer completed
    }
    void fail(std::exception_ptr) override {}
    void wait() override { ignore_cuda_error(cudaEventSynchronize(events.finished)); }
  };

  // The events of a transfer of a tensor made (or allocated) on `cu`'s compute stream, `ready`
  // recorded at that point of it.
  static NcclEvents events_after_compute(const CudaContext& cu) {
    check_cuda(cudaSetDevice(cu.device), "cudaSetDevice");
    NcclEvents events;
    check_cuda(cudaEventRecord(events.ready, cu.stream), "cudaEventRecord(compute -> nccl link)");
    return events;
  }

  // Creates the communicator of a new link (non-blocking) and has the watchdog see it come up;
  // mu_ is held. A failure to even start is Unavailable, thrown before any ticket names the link.
  std::shared_ptr<Link> open_link(LinkEnds ends, std::string id_hex) {
    auto link = std::make_shared<Link>();
    link->ends = std::move(ends);
    link->id = std::move(id_hex);
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
    watchdog_.watch(std::shared_ptr<NcclChannel>(link));
    return link;
  }

  void submit(const std::shared_ptr<Op>& op) {
    std::weak_ptr<Op> weak = op;
    try {
      op->link().queue.submit(
          SequenceNumber{op->sequence}, [this, op] { return issue(*op); },
          [this, weak](std::exception_ptr error) {
            if (weak.lock()) report(error);
          });
    } catch (const FailedPrecondition& e) {
      // A sequence number already taken (a receiver's peer sent it twice) or an aborted link.
      watchdog_.forget(op);
      if (!op->arrived) return report(std::current_exception());
      throw InvalidArgument(std::string(e.what()));
    }
  }

  // Launches `op` on its link; true when the launch is complete (the queue's contract).
  bool issue(Op& op) {
    Link& l = op.link();
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> nccl_lock(l.nccl_mu);
      if (!l.comm || !watchdog_.issuing(op)) throw FailedPrecondition("[nccl] the " + l.describe() + " was aborted");
      check_cuda(cudaSetDevice(l.ends.device), "cudaSetDevice");
      check_cuda(cudaStreamWaitEvent(l.stream, op.events.ready, 0), "cudaStreamWaitEvent(nccl link waits for compute)");
      r = l.ends.sender ? ncclSend(op.data, op.value.nbytes(), ncclUint8, 1, l.comm, l.stream)
                        : ncclRecv(op.data, op.value.nbytes(), ncclUint8, 0, l.comm, l.stream);
      if (r != ncclSuccess && r != ncclInProgress)
        throw Unavailable("[nccl] the " + l.describe() + ": " + (l.ends.sender ? "ncclSend" : "ncclRecv") +
                          " failed: " + nccl_message(r, l.comm));
    }
    return watchdog_.launched(op, r == ncclInProgress);
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

  std::mutex mu_;  // guards what follows, up to the watchdog
  std::exception_ptr aborted_;
  Failure on_failure_;
  std::map<std::tuple<int, int, std::string>, std::shared_ptr<Link>> sending_;  // (peer, GPU, remote GPU)
  std::map<std::pair<int, std::string>, std::shared_ptr<Link>> receiving_;      // (peer, id)
  NcclWatchdog watchdog_;  // last: its thread starts when the rest is made, and stops first
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
