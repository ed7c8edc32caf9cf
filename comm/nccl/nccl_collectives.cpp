#include "comm/nccl/nccl_collectives.h"

#include <nccl.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_dtype.h"
#include "comm/nccl/nccl_gathered_launch.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"
#include "comm/nccl/nccl_watchdog.h"
#include "runtime/cancellation.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/device_name.h"
#include "runtime/error.h"
#include "runtime/flight_recorder.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

// "NCCL communicator of group 7 (this is rank 0 of 2; ranks 0: ..., 1: ...)"; `local`: the ranks
// of this process, when known (several: "this process has ranks 0, 1 of 4").
std::string describe_group(const CollectiveParams& p, const std::vector<int>& local = {}) {
  std::string members, here;
  for (size_t i = 0; i < p.members.size(); ++i)
    members += (i ? ", " : "") + std::to_string(i) + ": " + p.members[i];
  for (int r : local) here += (here.empty() ? "" : ", ") + std::to_string(r);
  const std::string of = " of " + std::to_string(p.members.size());
  return "NCCL communicator of group " + std::to_string(p.group_key) +
         (local.size() > 1 ? " (this process has ranks " + here + of : " (this is rank " + std::to_string(p.member) + of) +
         "; ranks " + members + ")";
}

// The NCCL stream of a group on a device, made on first use and kept for the process's life (a
// group that comes back under a new id after a failure takes its old stream). One per group, not
// one per device: a stream runs its kernels in order, so groups sharing one would make a
// collective of one group wait for those of another queued before it, and two processes queuing
// two groups in opposite orders would wait for each other forever.
cudaStream_t nccl_stream(int device, int64_t group_key) {
  static std::mutex mu;
  static std::map<std::pair<int, int64_t>, cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mu);
  cudaStream_t& s = streams[{device, group_key}];
  if (!s) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(nccl)");
  }
  return s;
}

}  // namespace

struct NcclCollectives::Impl {
  struct Op;

  // A group's communicators in this process under one id: one per member of the group that lives
  // here (its NCCL rank), all made in one ncclGroupStart/End when the first instance has gathered
  // (NCCL's rule for several GPUs in one process), and used together.
  struct Comm final : NcclChannel {
    CollectiveParams group;  // the first call's: for messages
    std::vector<int> local;  // the group's members in this process, ascending
    std::mutex nccl_mu;      // one NCCL call on these communicators at a time
    // By position in `local`; guarded by nccl_mu. Empty until made; null once aborted.
    std::vector<ncclComm_t> comms;
    NcclIssueQueue queue;
    std::mutex gather_mu;
    // Instances whose members are still arriving, by (step, instance); guarded by gather_mu.
    std::map<std::pair<int64_t, int64_t>, std::shared_ptr<Op>> gathering;

    // Ready when every rank's communicator is; the first failure names its rank.
    NcclPoll poll_comm() override {
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      if (comms.empty()) return NcclPoll::pending();
      bool pending = false;
      for (size_t i = 0; i < comms.size(); ++i) {
        const NcclPoll p = poll_nccl_comm(comms[i]);
        if (p.kind == NcclPoll::Kind::kFailed) return NcclPoll::failed("rank " + std::to_string(local[i]) + ": " + p.error);
        pending = pending || p.kind == NcclPoll::Kind::kPending;
      }
      return pending ? NcclPoll::pending() : NcclPoll::ready();
    }
    void open() override { queue.open(); }
    void abort(std::exception_ptr error) override {
      {
        std::lock_guard<std::mutex> lock(gather_mu);
        gathering.clear();  // the watchdog fails those launches: they are this channel's
      }
      queue.fail_all(error);  // its items' fail callbacks find the communicator aborted: no-ops
      std::lock_guard<std::mutex> nccl_lock(nccl_mu);
      for (ncclComm_t& c : comms)
        if (c) ncclCommAbort(std::exchange(c, nullptr));  // its kernels return, so the zombies' events complete
    }
    std::exception_ptr error(const std::string& why) const override {
      return std::make_exception_ptr(Unavailable("[" + group.op + "] " + describe() + ": " + why));
    }
    std::string describe() const { return describe_group(group, local); }
  };

  // One member's call: its tensors stay with the instance until it completes, or, aborted, until
  // its events do. The events are made on the member's GPU.
  // The buffers' addresses are taken on the kernel's thread, before `ready`: raw_data() may first
  // compute pending eager values (runtime/pending_value.h), which must be queued before `ready`
  // and never from the thread that issues the group (inside ncclGroupStart/End, under nccl_mu).
  struct Part {
    NcclCall call;
    NcclEvents events;  // ready: recorded on the compute stream when the kernel ran
    std::vector<const void*> sends;  // call.inputs' data, in order
    std::vector<void*> receives;     // call.outputs' data, in order
  };

  // One instance: every local member's part, issued together.
  struct Op final : NcclGatheredLaunch<Part> {
    using NcclGatheredLaunch::NcclGatheredLaunch;
    Comm& comm() const { return static_cast<Comm&>(*channel()); }
    CollectiveInstanceKey key;
    std::atomic<bool> recorded{false};  // finish_launch() recorded the completion events

    NcclPoll poll_completion() override {
      for (size_t i = 0; i < size(); ++i)
        if (NcclPoll p = poll_nccl_event(part(i).events.finished); p.kind != NcclPoll::Kind::kReady) return p;
      return NcclPoll::ready();
    }
    // Each part's completion event, and its compute stream waiting for it.
    void finish_launch() override {
      record_finished();
      recorded = true;
      for (size_t i = 0; i < size(); ++i)
        check_cuda(cudaStreamWaitEvent(part(i).call.compute, part(i).events.finished, 0),
                   "cudaStreamWaitEvent(compute waits for nccl)");
    }
    // Aborted while NCCL may have queued work for it: its events cover that work (the tensors stay
    // with the zombie until they fire). Recorded again only when finish_launch() never did: the
    // stream's later work is none of this launch's. Never throws: without an event, waits.
    void abandoned() override {
      if (recorded) return;
      try {
        record_finished();
      } catch (...) {
        for (size_t i = 0; i < size(); ++i)
          ignore_cuda_error(cudaStreamSynchronize(nccl_stream(part(i).call.device, part(i).call.p.group_key)));
      }
    }
    void wait() override {
      for (size_t i = 0; i < size(); ++i) ignore_cuda_error(cudaEventSynchronize(part(i).events.finished));
    }
    void record_finished() {
      for (size_t i = 0; i < size(); ++i) {
        Part& m = part(i);
        check_cuda(cudaSetDevice(m.call.device), "cudaSetDevice");
        check_cuda(cudaEventRecord(m.events.finished, nccl_stream(m.call.device, m.call.p.group_key)),
                   "cudaEventRecord(nccl)");
      }
    }
  };

  explicit Impl(std::chrono::milliseconds timeout)
      : watchdog(timeout, [this](const std::shared_ptr<NcclChannel>& c, std::exception_ptr e) { watchdog.abort({c}, e); }) {}

  ~Impl() {
    // Pending collectives fail and every communicator is aborted: also those of a group whose
    // first instance is still gathering, which the watchdog does not watch yet. Then the GPU's
    // work on the zombies' buffers ends before they go.
    std::vector<std::shared_ptr<NcclChannel>> all;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [key, comm] : comms) all.push_back(comm);
    }
    watchdog.abort(all, std::make_exception_ptr(Unavailable("[nccl] the process's NCCL collectives were shut down")));
    watchdog.stop();
    watchdog.wait_for_zombies();
  }

  std::mutex mu;  // guards comms
  std::map<std::pair<int64_t, std::string>, std::shared_ptr<Comm>> comms;  // aborted ones stay, as tombstones
  NcclWatchdog watchdog;  // last: its thread starts when the rest is made, and stops first

  // The group's members in the process of p.member, ascending. InvalidArgument for one that is
  // not a GPU this process has (a group naming GPUs its task does not see would wait forever).
  static std::vector<int> local_members(const CollectiveParams& p) {
    const std::string here = task_of_device(p.members[static_cast<size_t>(p.member)], p.op);
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
      cudaGetLastError();
      gpus = 0;
    }
    std::vector<int> out;
    for (size_t i = 0; i < p.members.size(); ++i) {
      if (task_of_device(p.members[i], p.op) != here) continue;
      const DeviceSpec d = DeviceSpec::parse(p.members[i]);
      if (d.type != DeviceType::CUDA || !d.index || *d.index < 0 || *d.index >= gpus)
        throw InvalidArgument("[" + p.op + "] member " + std::to_string(i) + " of group " + std::to_string(p.group_key) +
                              " (" + p.members[i] + ") is on this task, which has " + std::to_string(gpus) +
                              " GPU(s): NCCL collectives take GPUs this process has");
      out.push_back(static_cast<int>(i));
    }
    return out;
  }

  // The communicators of (group, id), recorded now if new (made when its first instance has
  // gathered). FailedPrecondition for aborted ones.
  // A group that comes with a new id has moved on (a replicated graph rebuilt after a failed
  // step): its communicators under older ids are aborted, so their GPU buffers and threads go.
  std::shared_ptr<Comm> comm_for(const CollectiveParams& p) {
    for (const std::shared_ptr<Comm>& old : superseded_by(p))
      watchdog.abort({old}, std::make_exception_ptr(FailedPrecondition(
                                "[" + p.op + "] the " + old->describe() + " was replaced under a new nccl_id")));
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_pair(p.group_key, p.nccl_id);
    if (auto it = comms.find(key); it != comms.end()) {
      if (std::optional<std::string> why = watchdog.abort_reason(*it->second))
        throw FailedPrecondition("[" + p.op + "] the " + describe_group(p) + " was aborted (" + *why +
                                 "); running the group again needs a new nccl_id: rebuild the replicated graph");
      return it->second;
    }
    auto comm = std::make_shared<Comm>();
    comm->group = p;
    comm->local = local_members(p);
    (void)decode_nccl_id(p.nccl_id, p.op);  // a malformed id is this call's error, before anything waits
    comms[key] = comm;
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

  // The instance `key` of `comm` that is gathering, made (and watched: cancellable while it
  // gathers) if it is the first member's. comm_for() refused aborted communicators; one aborted
  // since fails a watched instance itself, and a new one here.
  std::shared_ptr<Op> gathering_op(const std::shared_ptr<Comm>& comm, const CollectiveInstanceKey& key,
                                   const CollectiveParams& p) {
    std::lock_guard<std::mutex> lock(comm->gather_mu);
    std::shared_ptr<Op>& op = comm->gathering[{key.step_id, key.instance_key}];
    if (op) return op;
    op = std::make_shared<Op>(comm, comm->local, "[" + p.op + "] " + key.to_string(),
                              std::chrono::steady_clock::now() + watchdog.init_timeout());
    op->key = key;
    watchdog.watch(op);
    // An abort since comm_for()'s check that did not see it: fail it here, exactly once.
    if (std::optional<std::string> why = watchdog.abort_reason(*comm); why && watchdog.forget(op))
      op->fail(std::make_exception_ptr(FailedPrecondition("[" + p.op + "] the " + comm->describe() + " was aborted (" +
                                                          *why + ")")));
    return op;
  }

  void run(NcclCall call, Done done) {
    std::vector<Tensor> all = call.inputs;
    all.insert(all.end(), call.outputs.begin(), call.outputs.end());
    for (const Tensor& t : all)
      if (!nccl_dtype(t.dtype()))
        throw InvalidArgument("[" + call.p.op + "] NCCL has no type for " + std::string(dtype_name(t.dtype())));
    std::shared_ptr<Comm> comm = comm_for(call.p);
    std::vector<const void*> sends;
    std::vector<void*> receives;
    for (const Tensor& t : call.inputs) sends.push_back(raw_data(t));
    for (const Tensor& t : call.outputs) receives.push_back(raw_data(t));
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    NcclEvents events;
    check_cuda(cudaEventRecord(events.ready, call.compute), "cudaEventRecord(compute -> nccl)");
    const CollectiveInstanceKey key{call.p.group_key, call.step_id, call.p.instance_key, call.p.group_instances};
    std::shared_ptr<Op> op = gathering_op(comm, key, call.p);
    const int member = call.p.member;
    CancellationManager* cancellation = call.cancellation;
    // From here on `done` belongs to the instance (arrive() throws only before taking it, for a
    // member that came twice): nothing below throws to run_async.
    const auto arrived = op->arrive(
        {.member = member, .cancellation = cancellation, .part = Part{std::move(call), std::move(events), std::move(sends), std::move(receives)}, .done = std::move(done)});
    if (arrived == Op::Arrived::kWaiting) return;
    {
      std::lock_guard<std::mutex> lock(comm->gather_mu);
      auto it = comm->gathering.find({key.step_id, key.instance_key});
      if (it != comm->gathering.end() && it->second == op && op->all_arrived()) comm->gathering.erase(it);
    }
    if (arrived == Op::Arrived::kGathered) issue_gathered(op);
  }

  // Queues a gathered instance on its communicators (making them first, for the first instance).
  // Every failure fails the instance (each member's done, once); nothing throws.
  void issue_gathered(const std::shared_ptr<Op>& op) {
    Comm& c = op->comm();
    if (!make_communicators(c, *op)) return;
    std::weak_ptr<Op> weak = op;
    try {
      c.queue.submit(
          op->key, [this, op] { return issue(*op); },
          [this, weak](std::exception_ptr error) {
            if (auto o = weak.lock()) watchdog.abort({o->channel()}, error);
          });
    } catch (...) {
      // Out of order (checked before queuing): only this instance fails; the communicators'
      // order is untouched.
      if (watchdog.forget(op)) op->fail(std::current_exception());
    }
  }

  // Makes c's communicators, one per local member, on the GPUs of `first`'s parts (the first
  // instance to gather), in one group and in NON-blocking mode: the watchdog then polls them until
  // ready, at most init_timeout. False when that failed at once: the communicators are aborted
  // (a tombstone with the reason), which fails `first`.
  bool make_communicators(Comm& c, Op& first) {
    std::string failure;
    {
      std::lock_guard<std::mutex> nccl_lock(c.nccl_mu);
      if (!c.comms.empty()) return true;
      // Aborted while `first` gathered (its step cancelled, the group replaced): the abort found no
      // communicators to abort and failed `first`; made now, nothing would ever abort them.
      if (watchdog.abort_reason(c)) return false;
      c.comms.assign(first.size(), nullptr);
      const NcclIdBytes bytes = decode_nccl_id(c.group.nccl_id, c.group.op);
      ncclUniqueId id;
      std::memcpy(id.internal, bytes.data(), kNcclIdBytes);
      const int nranks = static_cast<int>(c.group.members.size());
      if (const ncclResult_t r = ncclGroupStart(); r != ncclSuccess)
        failure = "ncclGroupStart failed: " + nccl_message(r, nullptr);
      for (size_t i = 0; i < first.size() && failure.empty(); ++i) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // returns at once; the watchdog polls ncclCommGetAsyncError with a deadline
        if (cudaSetDevice(first.part(i).call.device) != cudaSuccess) {
          failure = std::string("cudaSetDevice failed: ") + cudaGetErrorString(cudaGetLastError());
          break;
        }
        const ncclResult_t r = ncclCommInitRankConfig(&c.comms[i], nranks, id, first.member(i), &config);
        if (r != ncclSuccess && r != ncclInProgress) failure = "ncclCommInitRankConfig failed: " + nccl_message(r, c.comms[i]);
      }
      // Closed even after a failed call: NCCL's group state is per thread.
      const ncclResult_t end = ncclGroupEnd();
      if (failure.empty() && end != ncclSuccess && end != ncclInProgress)
        failure = "ncclGroupEnd (making the communicators) failed: " + nccl_message(end, nullptr);
    }
    watchdog.watch(std::static_pointer_cast<NcclChannel>(first.channel()));
    if (failure.empty()) return true;
    watchdog.abort({first.channel()}, c.error(failure));
    return false;
  }

  // Launches `op` on its communicators; true when the launch is complete (the queue's contract).
  bool issue(Op& op) {
    Comm& c = op.comm();
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> nccl_lock(c.nccl_mu);
      std::optional<std::string> why = watchdog.abort_reason(c);
      if (why || c.comms.empty() || !c.comms[0] || !watchdog.issuing(op))
        throw FailedPrecondition(op.what() + ": the " + c.describe() + " was aborted (" +
                                 why.value_or("") + ")");
      r = launch(op);
    }
    return watchdog.launched(op, r == ncclInProgress);
  }

  // The NCCL calls of every part of `op`, in one group; the caller holds its communicators'
  // nccl_mu. Returns ncclGroupEnd's ncclSuccess or ncclInProgress, else throws.
  ncclResult_t launch(Op& op) {
    Comm& c = op.comm();
    auto check = [&](ncclResult_t r, const char* what, ncclComm_t comm) {
      if (r != ncclSuccess && r != ncclInProgress)
        throw Unavailable(op.what() + ": " + c.describe() + ": " + what + " failed: " + nccl_message(r, comm));
    };
    check(ncclGroupStart(), "ncclGroupStart", nullptr);
    // Every call goes between Start and End, and End is called even when one failed: NCCL's group
    // state is per thread, and an unclosed group would swallow the next collective of this thread.
    std::exception_ptr first_error;
    try {
      for (size_t m = 0; m < op.size(); ++m) launch_part(op.part(m), c.comms[m], check);
    } catch (...) {
      first_error = std::current_exception();
    }
    const ncclResult_t r = ncclGroupEnd();
    if (first_error) std::rethrow_exception(first_error);
    check(r, "ncclGroupEnd", nullptr);
    return r;
  }

  // One member's calls (several for an all-reduce of several tensors) on its GPU's NCCL stream,
  // after its compute stream's work.
  template <class Check>
  static void launch_part(const Part& part, ncclComm_t comm, const Check& check) {
    const NcclCall& call = part.call;
    check_cuda(cudaSetDevice(call.device), "cudaSetDevice");
    cudaStream_t stream = nccl_stream(call.device, call.p.group_key);
    check_cuda(cudaStreamWaitEvent(stream, part.events.ready, 0), "cudaStreamWaitEvent(nccl waits for compute)");
    for (size_t i = 0; i < call.outputs.size(); ++i) {
      const Tensor& out = call.outputs[i];
      const ncclDataType_t dt = *nccl_dtype(out.dtype());
      switch (call.p.kind) {
        case CollectiveKind::kAllReduce:
          check(ncclAllReduce(part.sends[i], part.receives[i], static_cast<size_t>(out.size()), dt,
                              call.p.reduction == CollectiveReduction::kMean ? ncclAvg : ncclSum, comm, stream),
                "ncclAllReduce", comm);
          break;
        case CollectiveKind::kBroadcast:
          check(ncclBroadcast(call.p.member == call.p.root ? part.sends[0] : nullptr, part.receives[i],
                              static_cast<size_t>(out.size()), dt, call.p.root, comm, stream),
                "ncclBroadcast", comm);
          break;
        case CollectiveKind::kAllGather:
          check(ncclAllGather(part.sends[0], part.receives[i], static_cast<size_t>(call.inputs[0].size()), dt,
                              comm, stream),
                "ncclAllGather", comm);
          break;
      }
    }
  }
};

NcclCollectives::NcclCollectives(std::chrono::milliseconds init_timeout)
    : impl_(std::make_unique<Impl>(init_timeout)) {}

NcclCollectives::~NcclCollectives() = default;

namespace {

// The flight recorder's name for an NCCL collective (a literal: the recorder keeps the pointer).
const char* nccl_flight_kind(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "nccl all-reduce";
    case CollectiveKind::kBroadcast: return "nccl broadcast";
    case CollectiveKind::kAllGather: return "nccl all-gather";
  }
  return "nccl collective";
}

}  // namespace

void NcclCollectives::run_async(NcclCall call, Done done) {
  // GPU collectives bypass the collective executor (comm/collective_executor.h): recorded here,
  // one entry per member, from its call to its completion.
  if (FlightRecorder& fr = process_flight_recorder(); fr.enabled()) {
    uint64_t bytes = 0;
    for (const Tensor& t : call.inputs) bytes += t.nbytes();
    const FlightHandle h = fr.record_start({.kind = nccl_flight_kind(call.p.kind), .tag = static_cast<int32_t>(call.p.instance_key),
                                            .bytes = bytes, .group = call.p.group_key, .step = call.step_id});
    done = [h, inner = std::move(done)](std::exception_ptr error) {
      process_flight_recorder().record_end(h, error ? FlightState::kError : FlightState::kDone);
      inner(std::move(error));
    };
  }
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
