#include "comm/collective_executor.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "comm/collective_combine.h"
#include "runtime/cancellation.h"
#include "runtime/device.h"
#include "runtime/device_name.h"
#include "runtime/error.h"
#include "runtime/flight_recorder.h"

namespace weft {

namespace {

using InstanceId = std::tuple<int64_t, int64_t, int64_t>;  // group key, step id, instance key

// The flight recorder's name for a collective (a literal: the recorder keeps the pointer).
const char* flight_kind(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "all-gather";
  }
  return "collective";
}

bool same_group(const CollectiveParams& a, const CollectiveParams& b) {
  return a.kind == b.kind && a.members == b.members && a.group_instances == b.group_instances &&
         a.reduction == b.reduction && a.root == b.root;
}

}  // namespace

struct CollectiveExecutor::Instance {
  struct Arrival {
    std::vector<Tensor> inputs;
    DType dtype;  // broadcast, non-root: what the member declares it gets
    Shape shape;
    CancellationManager* cancellation = nullptr;
    CancellationToken token = kNoCancellationToken;
    Done done;
  };

  CollectiveParams params;  // the first arrival's
  int64_t step_id = 0;
  InstanceId id;
  std::vector<int> local_members;  // ascending
  std::vector<int> member_ranks;   // cross-process groups: each member's rank
  bool cross_process = false;
  // Its entry in the flight recorder: from its first local member's arrival to its end.
  FlightHandle flight;

  std::mutex mu;
  bool finished = false;                   // guarded by mu
  std::map<int, Arrival> arrived;          // guarded by mu; by member index
  std::shared_ptr<CrossProcessCollective> cross;  // guarded by mu
  LocalCombination combined;                      // set by the thread that combines
};

struct CollectiveExecutor::Impl {
  std::mutex mu;
  std::map<InstanceId, std::shared_ptr<Instance>> pending;  // guarded by mu: members still to come

  // Fails every local member of `inst` (once) and, when MPI holds it, abandons its collective.
  // `state`: kCancelled when the step was cancelled from outside, kError when the collective failed.
  void fail(CollectiveExecutor& ex, const std::shared_ptr<Instance>& inst, std::exception_ptr error,
            FlightState state = FlightState::kError) {
    std::map<int, Instance::Arrival> arrivals;
    std::shared_ptr<CrossProcessCollective> cross;
    {
      std::lock_guard lock(inst->mu);
      if (inst->finished) return;
      inst->finished = true;
      arrivals.swap(inst->arrived);
      cross = std::move(inst->cross);
    }
    process_flight_recorder().record_end(inst->flight, state);
    {
      std::lock_guard lock(mu);
      auto it = pending.find(inst->id);
      if (it != pending.end() && it->second == inst) pending.erase(it);
    }
    if (cross && ex.transport_) ex.transport_->abandon(cross, error);
    // Tokens are left registered: a callback that runs later finds the instance finished.
    for (auto& [member, a] : arrivals) a.done(error, {});
  }

  void finish(const std::shared_ptr<Instance>& inst, const std::vector<Tensor>& outputs) {
    std::map<int, Instance::Arrival> arrivals;
    {
      std::lock_guard lock(inst->mu);
      if (inst->finished) return;
      inst->finished = true;
      arrivals.swap(inst->arrived);
      inst->cross = nullptr;
    }
    process_flight_recorder().record_end(inst->flight, FlightState::kDone);
    for (auto& [member, a] : arrivals)
      if (a.cancellation && a.token != kNoCancellationToken) a.cancellation->deregister_callback(a.token);
    for (auto& [member, a] : arrivals) a.done(nullptr, outputs);
  }
};

CollectiveExecutor::CollectiveExecutor(std::unique_ptr<CollectiveTransport> transport)
    : transport_(std::move(transport)), impl_(std::make_unique<Impl>()) {}

CollectiveExecutor::~CollectiveExecutor() {
  std::map<InstanceId, std::shared_ptr<Instance>> left;
  {
    std::lock_guard lock(impl_->mu);
    left.swap(impl_->pending);
  }
  for (auto& [id, inst] : left)
    impl_->fail(*this, inst, std::make_exception_ptr(FailedPrecondition("[collective] the collective executor was destroyed")));
}

void CollectiveExecutor::run_async(const CollectiveParams& p, int64_t step_id, std::vector<Tensor> inputs,
                                   CancellationManager* cancellation, Done done) {
  const std::string where = "[" + p.op + "] ";
  std::shared_ptr<Instance> inst;
  try {
    const int n = static_cast<int>(p.members.size());
    if (n < 1) throw InvalidArgument(where + "the group has no members");
    if (p.member < 0 || p.member >= n)
      throw InvalidArgument(where + "member " + std::to_string(p.member) + " is not in a group of " + std::to_string(n));
    if (p.instance_key < 0 || p.instance_key >= p.group_instances)
      throw InvalidArgument(where + "instance_key " + std::to_string(p.instance_key) + " is not below group_instances " +
                            std::to_string(p.group_instances));
    if (cancellation && cancellation->is_cancelled()) std::rethrow_exception(cancellation->error());
    const InstanceId id{p.group_key, step_id, p.instance_key};
    std::lock_guard lock(impl_->mu);
    auto it = impl_->pending.find(id);
    if (it == impl_->pending.end()) {
      auto fresh = std::make_shared<Instance>();
      fresh->params = p;
      fresh->step_id = step_id;
      fresh->id = id;
      const std::string me = local_task_name();
      std::set<std::string> group_tasks;
      std::vector<std::string> member_tasks;
      for (int m = 0; m < n; ++m) {
        member_tasks.push_back(task_of_device(p.members[static_cast<size_t>(m)], p.op));
        group_tasks.insert(member_tasks.back());
        if (member_tasks.back() == me) fresh->local_members.push_back(m);
      }
      fresh->cross_process = group_tasks.size() > 1;
      if (fresh->cross_process) {
        if (!transport_)
          throw FailedPrecondition(where + "group " + std::to_string(p.group_key) +
                                   " spans several processes; that needs a cluster (cluster::init)");
        const auto& tasks = transport_->tasks();
        std::string missing;
        for (const std::string& t : tasks)
          if (!group_tasks.contains(t)) missing += (missing.empty() ? "" : ", ") + t;
        if (!missing.empty())
          throw InvalidArgument(where + "group " + std::to_string(p.group_key) +
                                " spans several processes, so it must span every task of the cluster; it lacks " + missing);
        for (const std::string& t : member_tasks) {
          int rank = -1;
          for (size_t r = 0; r < tasks.size(); ++r)
            if (tasks[r] == t) rank = static_cast<int>(r);
          if (rank < 0) throw InvalidArgument(where + "group member task " + t + " is not a task of the cluster");
          fresh->member_ranks.push_back(rank);
        }
      }
      // One entry per instance in this process (not per local member): what the group waits for.
      uint64_t bytes = 0;
      for (const Tensor& t : inputs)
        if (t.defined() && !t.is_symbolic()) bytes += t.nbytes();
      fresh->flight = process_flight_recorder().record_start({.kind = flight_kind(p.kind), .tag = static_cast<int32_t>(p.instance_key),
                                                              .bytes = bytes, .group = p.group_key, .step = step_id});
      it = impl_->pending.emplace(id, std::move(fresh)).first;
    }
    inst = it->second;
    if (!same_group(inst->params, p))
      throw InvalidArgument(where + "group " + std::to_string(p.group_key) + " instance " + std::to_string(p.instance_key) +
                            " of step " + std::to_string(step_id) +
                            ": members disagree on the collective (kind, members, group_instances, reduction or root)");
    bool local = false;
    for (int m : inst->local_members) local |= m == p.member;
    if (!local)
      throw InvalidArgument(where + "member " + std::to_string(p.member) + " (" + p.members[static_cast<size_t>(p.member)] +
                            ") is not a device of this task (" + local_task_name() + ")");
    std::lock_guard ilock(inst->mu);
    if (inst->arrived.contains(p.member))
      throw InvalidArgument(where + "member " + std::to_string(p.member) + " contributes twice to group " +
                            std::to_string(p.group_key) + " instance " + std::to_string(p.instance_key) + " of step " +
                            std::to_string(step_id));
    inst->arrived[p.member] =
        Instance::Arrival{std::move(inputs), p.dtype, p.shape, cancellation, kNoCancellationToken, std::move(done)};
    if (inst->arrived.size() == inst->local_members.size()) impl_->pending.erase(it);
  } catch (...) {
    // `done` was moved only once the arrival was stored, after every throw above.
    if (done) done(std::current_exception(), {});
    return;
  }

  bool complete = false;
  {
    std::lock_guard ilock(inst->mu);
    complete = !inst->finished && inst->arrived.size() == inst->local_members.size();
  }
  if (cancellation) {
    std::weak_ptr<Instance> weak = inst;
    const CancellationToken token = cancellation->register_callback([this, weak](const std::exception_ptr& e) {
      if (auto i = weak.lock()) impl_->fail(*this, i, e, FlightState::kCancelled);
    });
    std::lock_guard ilock(inst->mu);
    if (auto a = inst->arrived.find(p.member); a != inst->arrived.end()) a->second.token = token;
  }
  if (!complete) return;

  // Every local member is here: combine in member order, then the cross-process stage.
  std::vector<LocalContribution> contributions;
  std::vector<Tensor> outputs;
  try {
    {
      std::lock_guard ilock(inst->mu);
      if (inst->finished) return;
      for (auto& [m, a] : inst->arrived) contributions.push_back({m, a.inputs, a.dtype, a.shape});
    }
    // (Copies of the handles: a cancellation may take the arrivals away meanwhile.)
    const CollectiveParams& gp = inst->params;
    inst->combined = combine_local(gp, contributions);
    if (!inst->cross_process) {
      outputs = finish_local(gp, inst->combined, static_cast<int64_t>(gp.members.size()));
    } else {
      auto cross = make_cross(gp, inst->combined, inst->member_ranks, contributions);
      cross->key = {gp.group_key, inst->step_id, gp.instance_key, gp.group_instances};
      // The callback owns the instance until the transport is done with it (the instance lets go
      // of `cross` when it finishes: no cycle is left).
      cross->done = [this, i = inst, c = cross.get()](std::exception_ptr error) {
        if (error) return impl_->fail(*this, i, error);
        std::vector<Tensor> outs;
        try {
          outs = finish_cross(i->params, i->combined, *c, static_cast<int64_t>(i->params.members.size()));
        } catch (...) {
          return impl_->fail(*this, i, std::current_exception());
        }
        impl_->finish(i, outs);
      };
      {
        std::lock_guard ilock(inst->mu);
        if (inst->finished) return;
        inst->cross = cross;
      }
      transport_->start(std::move(cross));
      return;
    }
  } catch (...) {
    impl_->fail(*this, inst, std::current_exception());
    return;
  }
  impl_->finish(inst, outputs);
}

void CollectiveExecutor::reset(std::chrono::milliseconds timeout) {
  std::map<InstanceId, std::shared_ptr<Instance>> left;
  {
    std::lock_guard lock(impl_->mu);
    left.swap(impl_->pending);
  }
  for (auto& [id, inst] : left)
    impl_->fail(*this, inst,
                std::make_exception_ptr(FailedPrecondition("[collective] group " + std::to_string(std::get<0>(id)) +
                                                           " was reset while step " + std::to_string(std::get<1>(id)) +
                                                           " waited for it")));
  if (transport_) transport_->reset(timeout);
}

namespace {
std::mutex g_collectives_mu;
std::unique_ptr<CollectiveExecutor>& collectives_slot() {
  static auto* slot = new std::unique_ptr<CollectiveExecutor>();  // never destroyed: used until exit
  return *slot;
}
}  // namespace

CollectiveExecutor& process_collectives() {
  std::lock_guard lock(g_collectives_mu);
  auto& slot = collectives_slot();
  if (!slot) slot = std::make_unique<CollectiveExecutor>();
  return *slot;
}

void set_process_collectives(std::unique_ptr<CollectiveExecutor> executor) {
  std::unique_ptr<CollectiveExecutor> old;
  {
    std::lock_guard lock(g_collectives_mu);
    old = std::exchange(collectives_slot(), std::move(executor));
  }
  // The old one is kept, not destroyed: a kernel of this process may still hold a reference.
  if (old) (void)old.release();
}

void shut_down_process_collectives() {
  std::unique_ptr<CollectiveExecutor> old;
  {
    std::lock_guard lock(g_collectives_mu);
    old = std::move(collectives_slot());
  }
}

}  // namespace weft
