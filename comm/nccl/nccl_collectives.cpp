#include "comm/nccl/nccl_collectives.h"

#include <nccl.h>

#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_dtype.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"
#include "comm/nccl/nccl_watchdog.h"
#include "runtime/cancellation.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace weft {

namespace {

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
  // A group's communicator under one id.
  struct Comm final : NcclChannel {
    CollectiveParams group;               // for messages: the group's members and this rank
    ncclComm_t comm = nullptr;
    std::mutex nccl_mu;                   // one NCCL call on `comm` at a time
    NcclIssueQueue queue;

    NcclPoll poll_comm() override {
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      return poll_nccl_comm(comm);
    }
    void open() override { queue.open(); }
    void abort(std::exception_ptr error) override {
      queue.fail_all(error);  // its items' fail callbacks find the communicator aborted: no-ops
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      if (comm) ncclCommAbort(comm);  // makes its kernels return, so the zombies' events complete
      comm = nullptr;
    }
    std::exception_ptr error(const std::string& why) const override {
      return std::make_exception_ptr(Unavailable("[" + group.op + "] " + describe_group(group) + ": " + why));
    }
  };

  // One collective: its tensors stay with it until it completes, or, aborted, until its event does.
  struct Op final : NcclLaunch {
    Op(std::shared_ptr<Comm> c, NcclCall call, Done done, NcclEvents events)
        : NcclLaunch(std::move(c)), call(std::move(call)), done(std::move(done)), events(std::move(events)) {}
    Comm& comm() const { return static_cast<Comm&>(*channel()); }
    NcclCall call;
    Done done;
    CollectiveInstanceKey key;
    NcclEvents events;  // ready: recorded on the compute stream when the kernel ran

    NcclPoll poll_completion() override { return poll_nccl_event(events.finished); }
    // The completion event, and the compute stream waiting for it.
    void finish_launch() override {
      check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
      check_cuda(cudaEventRecord(events.finished, nccl_stream(call.device)), "cudaEventRecord(nccl)");
      check_cuda(cudaStreamWaitEvent(call.compute, events.finished, 0), "cudaStreamWaitEvent(compute waits for nccl)");
    }
    // Neither complete() nor fail() has run, so the step (and its CancellationManager) is alive.
    std::exception_ptr cancelled() const override {
      CancellationManager* cm = call.cancellation;
      return cm && cm->is_cancelled() ? cm->error() : nullptr;
    }
    void complete() override { done(nullptr); }
    // A collective of a cancelled step fails with the step's error, the others with `error`.
    void fail(std::exception_ptr error) override {
      std::exception_ptr step = cancelled();
      done(step ? step : error);
    }
  };

  explicit Impl(std::chrono::milliseconds timeout)
      : watchdog(timeout, [this](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) { watchdog.abort({c}, e); }) {}

  ~Impl() {
    // Pending collectives fail; the open communicators are aborted.
    watchdog.abort(watchdog.live_channels(),
                   std::make_exception_ptr(Unavailable("[nccl] the process's NCCL collectives were shut down")));
  }

  std::mutex mu;  // guards comms
  std::map<std::pair<int64_t, std::string>, std::shared_ptr<Comm>> comms;  // aborted ones stay, as tombstones
  NcclWatchdog watchdog;  // last: its thread starts when the rest is made, and stops first

  // The communicator of (group, id), created now if new. FailedPrecondition for an aborted one.
  // A group that comes with a new id has moved on (a replicated graph rebuilt after a failed
  // step): its communicators under older ids are aborted, so their GPU buffers and threads go.
  std::shared_ptr<Comm> comm_for(const NcclCall& c) {
    for (const std::shared_ptr<Comm>& old : superseded_by(c.p))
      watchdog.abort({old}, std::make_exception_ptr(FailedPrecondition(
                                "[" + c.p.op + "] the " + describe_group(old->group) + " was replaced under a new nccl_id")));
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_pair(c.p.group_key, c.p.nccl_id);
    if (auto it = comms.find(key); it != comms.end()) {
      if (std::optional<std::string> why = watchdog.abort_reason(*it->second))
        throw FailedPrecondition("[" + c.p.op + "] the " + describe_group(c.p) + " was aborted (" + *why +
                                 "); running the group again needs a new nccl_id: rebuild the replicated graph");
      return it->second;
    }
    auto comm = std::make_shared<Comm>();
    comm->group = c.p;
    const NcclIdBytes bytes = decode_nccl_id(c.p.nccl_id, c.p.op);
    ncclUniqueId id;
    std::memcpy(id.internal, bytes.data(), kNcclIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // returns at once; the watchdog polls ncclCommGetAsyncError with a deadline
    check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
    const ncclResult_t r = ncclCommInitRankConfig(&comm->comm, static_cast<int>(c.p.members.size()), id, c.p.member, &config);
    comms[key] = comm;
    watchdog.watch(comm);
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string why = "ncclCommInitRankConfig failed: " + nccl_message(r, comm->comm);
      watchdog.abort({comm}, comm->error(why));  // a tombstone with the reason
      throw Unavailable("[" + c.p.op + "] " + describe_group(c.p) + ": " + why);
    }
    return comm;
  }

  // The live communicators of p's group under other ids, when p's id has none yet.
  std::vector<std::shared_ptr<Comm>> superseded_by(const CollectiveParams& p) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::shared_ptr<Comm>> out;
    if (comms.contains({p.group_key, p.nccl_id})) return out;
    for (auto it = comms.lower_bound({p.group_key, std::string()}); it != comms.end() && it->first.first == p.group_key; ++it)
      if (!watchdog.abort_reason(*it->second)) out.push_back(it->second);
    return out;
  }

  void run(NcclCall call, Done done) {
    std::vector<Tensor> all = call.inputs;
    all.insert(all.end(), call.outputs.begin(), call.outputs.end());
    for (const Tensor& t : all)
      if (!nccl_dtype(t.dtype()))
        throw InvalidArgument("[" + call.p.op + "] NCCL has no type for " + std::string(dtype_name(t.dtype())));
    std::shared_ptr<Comm> comm = comm_for(call);
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    NcclEvents events;
    check_cuda(cudaEventRecord(events.ready, call.compute), "cudaEventRecord(compute -> nccl)");
    auto op = std::make_shared<Op>(std::move(comm), std::move(call), std::move(done), std::move(events));
    op->key = CollectiveInstanceKey{op->call.p.group_key, op->call.step_id, op->call.p.instance_key,
                                    op->call.p.group_instances};
    watchdog.watch(op);
    std::weak_ptr<Op> weak = op;
    try {
      op->comm().queue.submit(
          op->key, [this, op] { return issue(*op); },
          [this, weak](std::exception_ptr error) {
            if (auto o = weak.lock()) watchdog.abort({o->channel()}, error);
          });
    } catch (...) {
      // Out of order (checked before queuing): only this collective fails; the communicator's
      // order is untouched.
      watchdog.forget(op);
      throw;  // run_async gives it to the caller's done
    }
  }

  // Launches `op` on its communicator; true when the launch is complete (the queue's contract).
  bool issue(Op& op) {
    Comm& c = op.comm();
    const NcclCall& call = op.call;
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> nccl_lock(c.nccl_mu);
      if (std::optional<std::string> why = watchdog.abort_reason(c); why || !c.comm)
        throw FailedPrecondition("[" + call.p.op + "] the " + describe_group(call.p) + " was aborted (" +
                                 why.value_or("") + ")");
      r = launch(op);
    }
    return watchdog.launched(op, r == ncclInProgress);
  }

  // The NCCL calls of `op`, in one group; the caller holds its communicator's nccl_mu. Returns
  // ncclGroupEnd's ncclSuccess or ncclInProgress, else throws.
  ncclResult_t launch(Op& op) {
    Comm& c = op.comm();
    const NcclCall& call = op.call;
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    cudaStream_t stream = nccl_stream(call.device);
    check_cuda(cudaStreamWaitEvent(stream, op.events.ready, 0), "cudaStreamWaitEvent(nccl waits for compute)");
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
    return r;
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
