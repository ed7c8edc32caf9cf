#include "comm/nccl/nccl_collectives.h"

#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_dtype.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"
#include "runtime/cancellation.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace weft {

namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks while something is pending. NCCL's non-blocking mode and CUDA's
// events are polled; a millisecond is far below a collective's latency across tasks.
constexpr auto kPollInterval = std::chrono::milliseconds(1);

std::string describe_group(const CollectiveParams& p) {
  std::string members;
  for (size_t i = 0; i < p.members.size(); ++i)
    members += (i ? ", " : "") + std::to_string(i) + ": " + p.members[i];
  return "NCCL communicator of group " + std::to_string(p.group_key) + " (this is rank " + std::to_string(p.member) +
         " of " + std::to_string(p.members.size()) + "; ranks " + members + ")";
}

// One NCCL stream per device, made on first use and kept for the process's life.
cudaStream_t nccl_stream(int device) {
  static std::mutex mu;
  static std::map<int, cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mu);
  cudaStream_t& s = streams[device];
  if (!s) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(nccl)");
  }
  return s;
}

}  // namespace

struct NcclCollectives::Impl {
  enum class CommState { kInitializing, kReady, kAborted };
  enum class OpState { kQueued, kLaunching, kInFlight, kDone };

  struct Comm {
    std::pair<int64_t, std::string> key;  // (group key, hex id)
    CollectiveParams group;               // for messages: the group's members and this rank
    int device = 0;
    ncclComm_t comm = nullptr;
    std::mutex nccl_mu;                   // one NCCL call on `comm` at a time
    CommState state = CommState::kInitializing;  // guarded by Impl::mu
    Clock::time_point deadline;
    std::string abort_reason;                    // guarded by Impl::mu
    NcclIssueQueue queue;
  };

  struct Op {
    NcclCall call;
    Done done;
    std::shared_ptr<Comm> comm;
    CollectiveInstanceKey key;
    cudaEvent_t ready = nullptr;     // recorded on the compute stream when the kernel ran
    cudaEvent_t finished = nullptr;  // recorded on the NCCL stream after the launch
    OpState state = OpState::kQueued;  // guarded by Impl::mu
    ~Op() {
      if (ready) ignore_cuda_error(cudaEventDestroy(ready));
      if (finished) ignore_cuda_error(cudaEventDestroy(finished));
    }
  };

  explicit Impl(std::chrono::milliseconds timeout) : init_timeout(timeout), watchdog([this] { watch(); }) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_all();
    watchdog.join();
  }

  std::chrono::milliseconds init_timeout;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::map<std::pair<int64_t, std::string>, std::shared_ptr<Comm>> comms;  // aborted ones stay, as tombstones
  std::vector<std::shared_ptr<Op>> ops;      // not yet complete
  std::vector<std::shared_ptr<Op>> zombies;  // of aborted communicators: kept until their event completes
  std::thread watchdog;                      // last: starts when the rest is made

  // The communicator of (group, id), created now if new. FailedPrecondition for an aborted one.
  // A group that comes with a new id has moved on (a replicated graph rebuilt after a failed
  // step): its communicators under older ids are aborted, so their GPU buffers and threads go.
  std::shared_ptr<Comm> comm_for(const NcclCall& c) {
    for (const std::shared_ptr<Comm>& old : superseded_by(c.p))
      fail_comm(old, std::make_exception_ptr(FailedPrecondition("[" + c.p.op + "] the " + describe_group(old->group) +
                                                                " was replaced under a new nccl_id")),
                /*abort=*/true);
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_pair(c.p.group_key, c.p.nccl_id);
    if (auto it = comms.find(key); it != comms.end()) {
      if (it->second->state == CommState::kAborted)
        throw FailedPrecondition("[" + c.p.op + "] the " + describe_group(c.p) + " was aborted (" +
                                 it->second->abort_reason +
                                 "); running the group again needs a new nccl_id: rebuild the replicated graph");
      return it->second;
    }
    auto comm = std::make_shared<Comm>();
    comm->key = key;
    comm->group = c.p;
    comm->device = c.device;
    comm->deadline = Clock::now() + init_timeout;
    const NcclIdBytes bytes = decode_nccl_id(c.p.nccl_id, c.p.op);
    ncclUniqueId id;
    std::memcpy(id.internal, bytes.data(), kNcclIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // returns at once; the watchdog polls ncclCommGetAsyncError with a deadline
    check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
    const ncclResult_t r = ncclCommInitRankConfig(&comm->comm, static_cast<int>(c.p.members.size()), id, c.p.member, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string why = "ncclCommInitRankConfig failed: " + nccl_message(r, comm->comm);
      if (comm->comm) ncclCommAbort(comm->comm);
      comm->comm = nullptr;
      comm->state = CommState::kAborted;
      comm->abort_reason = why;
      comms[key] = comm;
      throw Unavailable("[" + c.p.op + "] " + describe_group(c.p) + ": " + why);
    }
    comms[key] = comm;
    cv.notify_all();
    return comm;
  }

  // The live communicators of p's group under other ids, when p's id has none yet.
  std::vector<std::shared_ptr<Comm>> superseded_by(const CollectiveParams& p) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::shared_ptr<Comm>> out;
    if (comms.contains({p.group_key, p.nccl_id})) return out;
    for (auto it = comms.lower_bound({p.group_key, std::string()}); it != comms.end() && it->first.first == p.group_key; ++it)
      if (it->second->state != CommState::kAborted) out.push_back(it->second);
    return out;
  }

  void run(NcclCall call, Done done) {
    std::vector<Tensor> all = call.inputs;
    all.insert(all.end(), call.outputs.begin(), call.outputs.end());
    for (const Tensor& t : all)
      if (!nccl_dtype(t.dtype()))
        throw InvalidArgument("[" + call.p.op + "] NCCL has no type for " + std::string(dtype_name(t.dtype())));
    auto op = std::make_shared<Op>();
    op->key = CollectiveInstanceKey{call.p.group_key, call.step_id, call.p.instance_key, call.p.group_instances};
    op->comm = comm_for(call);
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    op->ready = new_nccl_event();
    op->finished = new_nccl_event();
    check_cuda(cudaEventRecord(op->ready, call.compute), "cudaEventRecord(compute -> nccl)");
    op->call = std::move(call);
    op->done = std::move(done);
    {
      std::lock_guard<std::mutex> lock(mu);
      ops.push_back(op);
    }
    cv.notify_all();
    std::weak_ptr<Op> weak = op;
    try {
      op->comm->queue.submit(
          op->key, [this, op] { return issue(*op); },
          [this, weak](std::exception_ptr error) {
            if (auto o = weak.lock()) fail_comm(o->comm, error, /*abort=*/true);
          });
    } catch (...) {
      // Out of order (checked before queuing): only this collective fails; the communicator's
      // order is untouched.
      std::lock_guard<std::mutex> lock(mu);
      std::erase(ops, op);
      throw;
    }
  }

  // Launches `op` on its communicator; true when the launch is complete (the queue's contract).
  bool issue(Op& op) {
    Comm& c = *op.comm;
    const NcclCall& call = op.call;
    std::lock_guard<std::mutex> nccl_lock(c.nccl_mu);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (c.state == CommState::kAborted)
        throw FailedPrecondition("[" + call.p.op + "] the " + describe_group(call.p) + " was aborted (" + c.abort_reason + ")");
    }
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    cudaStream_t stream = nccl_stream(call.device);
    check_cuda(cudaStreamWaitEvent(stream, op.ready, 0), "cudaStreamWaitEvent(nccl waits for compute)");
    auto check = [&](ncclResult_t r, const char* what) {
      if (r != ncclSuccess && r != ncclInProgress)
        throw Unavailable("[" + call.p.op + "] " + describe_group(call.p) + ": " + what + " failed: " + nccl_message(r, c.comm));
    };
    check(ncclGroupStart(), "ncclGroupStart");
    // Every call goes between Start and End, and End is called even when one failed: NCCL's group
    // state is per thread, and an unclosed group would swallow the next collective of this thread.
    std::exception_ptr first_error;
    for (size_t i = 0; i < call.outputs.size() && !first_error; ++i) {
      const Tensor& out = call.outputs[i];
      const ncclDataType_t dt = *nccl_dtype(out.dtype());
      try {
        switch (call.p.kind) {
          case CollectiveKind::kAllReduce:
            check(ncclAllReduce(call.inputs[i].raw_data(), out.raw_data(), static_cast<size_t>(out.size()), dt,
                                call.p.reduction == CollectiveReduction::kMean ? ncclAvg : ncclSum, c.comm, stream),
                  "ncclAllReduce");
            break;
          case CollectiveKind::kBroadcast:
            check(ncclBroadcast(call.p.member == call.p.root ? call.inputs[0].raw_data() : nullptr, out.raw_data(),
                                static_cast<size_t>(out.size()), dt, call.p.root, c.comm, stream),
                  "ncclBroadcast");
            break;
          case CollectiveKind::kAllGather:
            check(ncclAllGather(call.inputs[0].raw_data(), out.raw_data(), static_cast<size_t>(call.inputs[0].size()),
                                dt, c.comm, stream),
                  "ncclAllGather");
            break;
        }
      } catch (...) {
        first_error = std::current_exception();
      }
    }
    const ncclResult_t r = ncclGroupEnd();
    if (first_error) std::rethrow_exception(first_error);
    check(r, "ncclGroupEnd");
    if (r == ncclInProgress) {
      std::lock_guard<std::mutex> lock(mu);
      // The watchdog finishes the launch when the communicator says ncclSuccess.
      if (op.state != OpState::kDone) op.state = OpState::kLaunching;
      return false;
    }
    finish_launch(op);
    return true;
  }

  // The launch is complete: the completion event, and the compute stream waiting for it.
  void finish_launch(Op& op) {
    check_cuda(cudaSetDevice(op.call.device), "cudaSetDevice");
    check_cuda(cudaEventRecord(op.finished, nccl_stream(op.call.device)), "cudaEventRecord(nccl)");
    check_cuda(cudaStreamWaitEvent(op.call.compute, op.finished, 0), "cudaStreamWaitEvent(compute waits for nccl)");
    std::lock_guard<std::mutex> lock(mu);
    if (op.state != OpState::kDone) op.state = OpState::kInFlight;  // else failed meanwhile
  }

  // Aborts and drops `comm` (when `abort`) and fails every collective of it: those of a cancelled
  // step with the step's error, the others with `error`.
  void fail_comm(const std::shared_ptr<Comm>& comm, std::exception_ptr error, bool abort) {
    std::vector<std::shared_ptr<Op>> failed;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (comm->state == CommState::kAborted) return;
      comm->state = CommState::kAborted;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        comm->abort_reason = e.what();
      } catch (...) {
        comm->abort_reason = "unknown error";
      }
      for (auto it = ops.begin(); it != ops.end();) {
        if ((*it)->comm == comm) {
          failed.push_back(*it);
          if ((*it)->state == OpState::kLaunching || (*it)->state == OpState::kInFlight) zombies.push_back(*it);
          (*it)->state = OpState::kDone;
          it = ops.erase(it);
        } else {
          ++it;
        }
      }
    }
    comm->queue.fail_all(error);  // its items' fail callbacks find the communicator aborted: no-ops
    if (abort && comm->comm) {
      std::lock_guard<std::mutex> nccl_lock(comm->nccl_mu);
      ncclCommAbort(comm->comm);  // makes its kernels return, so the zombies' events complete
      comm->comm = nullptr;
    }
    for (auto& op : failed) {
      CancellationManager* cm = op->call.cancellation;
      std::exception_ptr e = cm && cm->is_cancelled() ? cm->error() : error;
      op->done(e ? e : error);
    }
  }

  std::exception_ptr unavailable(const Comm& c, const std::string& why) {
    return std::make_exception_ptr(Unavailable("[" + c.group.op + "] " + describe_group(c.group) + ": " + why));
  }

  // One look at everything pending; returns whether anything is.
  bool poll() {
    std::vector<std::shared_ptr<Comm>> initializing;
    std::vector<std::shared_ptr<Op>> pending;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [key, c] : comms)
        if (c->state == CommState::kInitializing) initializing.push_back(c);
      pending = ops;
      std::erase_if(zombies, [](const std::shared_ptr<Op>& z) { return cudaEventQuery(z->finished) != cudaErrorNotReady; });
      cudaGetLastError();  // a failed query's error is not reported to a later call
    }
    for (auto& c : initializing) {
      ncclResult_t r;
      {
        std::lock_guard<std::mutex> nccl_lock(c->nccl_mu);
        if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess) r = ncclInternalError;
      }
      if (r == ncclSuccess) {
        {
          std::lock_guard<std::mutex> lock(mu);
          c->state = CommState::kReady;
        }
        c->queue.open();
      } else if (r != ncclInProgress) {
        fail_comm(c, unavailable(*c, "creating it failed: " + nccl_message(r, nullptr)), true);
      } else if (Clock::now() > c->deadline) {
        fail_comm(c, unavailable(*c, "not every rank joined within " + std::to_string(init_timeout.count()) +
                                         " ms (a peer is missing or failed)"), true);
      }
    }
    for (auto& op : pending) {
      OpState state;
      std::exception_ptr cancelled;
      {
        // Under the lock: an op not yet kDone has not had its done called, so its step (and the
        // step's CancellationManager) is still alive.
        std::lock_guard<std::mutex> lock(mu);
        state = op->state;
        if (state == OpState::kDone) continue;
        CancellationManager* cm = op->call.cancellation;
        if (cm && cm->is_cancelled()) cancelled = cm->error();
      }
      if (cancelled) {  // also while queued: its turn would leave a hole in the order
        fail_comm(op->comm, cancelled, true);
        continue;
      }
      if (state == OpState::kQueued) continue;
      ncclResult_t r = ncclSuccess;
      {
        std::lock_guard<std::mutex> nccl_lock(op->comm->nccl_mu);
        if (!op->comm->comm || ncclCommGetAsyncError(op->comm->comm, &r) != ncclSuccess) r = ncclInternalError;
      }
      if (r != ncclSuccess && r != ncclInProgress) {
        fail_comm(op->comm, unavailable(*op->comm, "NCCL error: " + nccl_message(r, nullptr)), true);
        continue;
      }
      if (state == OpState::kLaunching) {
        if (r == ncclSuccess) {
          try {
            finish_launch(*op);
          } catch (...) {
            fail_comm(op->comm, std::current_exception(), true);
            continue;
          }
          op->comm->queue.open();
        }
        continue;
      }
      const cudaError_t q = cudaEventQuery(op->finished);
      if (q == cudaErrorNotReady) continue;
      std::exception_ptr error;
      if (q != cudaSuccess) {
        cudaGetLastError();
        error = unavailable(*op->comm, std::string("waiting for the collective failed: ") + cudaGetErrorString(q));
      }
      if (error) {
        fail_comm(op->comm, error, true);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (op->state == OpState::kDone) continue;  // failed meanwhile
        op->state = OpState::kDone;
        std::erase(ops, op);
      }
      op->done(nullptr);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!ops.empty() || !zombies.empty()) return true;
    for (auto& [key, c] : comms)
      if (c->state == CommState::kInitializing) return true;
    return false;
  }

  void watch() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      lock.unlock();
      bool busy = false;
      try {
        busy = poll();
      } catch (...) {
        busy = true;  // a CUDA call of the poll failed; the next poll tries again
      }
      lock.lock();
      if (stopping) break;
      if (busy) cv.wait_for(lock, kPollInterval);
      else cv.wait(lock, [&] { return stopping || !ops.empty(); });
    }
    // Shutting down: fail what is pending, abort what is open.
    std::vector<std::shared_ptr<Comm>> open;
    for (auto& [key, c] : comms)
      if (c->state != CommState::kAborted) open.push_back(c);
    lock.unlock();
    for (auto& c : open)
      fail_comm(c, std::make_exception_ptr(Unavailable("[nccl] the process's NCCL collectives were shut down")), true);
  }
};

NcclCollectives::NcclCollectives(std::chrono::milliseconds init_timeout)
    : impl_(std::make_unique<Impl>(init_timeout)) {}

NcclCollectives::~NcclCollectives() = default;

void NcclCollectives::run_async(NcclCall call, Done done) {
  try {
    impl_->run(std::move(call), done);
  } catch (...) {
    done(std::current_exception());
  }
}

NcclCollectives& process_nccl_collectives() {
  // Never destroyed: kernels may complete during static destruction, and ncclCommAbort after the
  // CUDA runtime unloads is not safe.
  static auto* collectives = new NcclCollectives();
  return *collectives;
}

}  // namespace weft
