// The chief's side of the profiler (api/profiler.h): recording turned on and off on every task,
// and their events brought onto the chief's clock.
//
// Clocks: steady_clock is shared by the processes of one host but not across hosts. The chief
// notes when it sends each task the request and when the answer arrives; the task notes its own
// clock on receipt. Assuming the two legs take equally long, the task's clock was ahead by
// task_time - (sent + received) / 2, which is taken off each of its events. The error is at most
// half the round trip (microseconds on one host, tens of them across a network).
//
// At 1000 tasks: one small request per task and one answer each, of size proportional to what the
// task recorded; the chief decodes them one at a time on its reply thread. A profile is a rare,
// explicit act, so a linear gather is acceptable here (unlike the per-step path).
#include <map>

#include "cluster/cluster_runtime.h"
#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "runtime/error.h"

namespace weft {

std::vector<TaskTimeline> ClusterRuntime::timeline_control(bool enable, bool collect,
                                                           std::chrono::milliseconds timeout) {
  if (rank_ != spec_.chief_rank()) throw FailedPrecondition("[profiler] only the chief controls the cluster's timeline");
  std::map<int, int64_t> sent_us;  // per rank; written before the request leaves
  std::map<int, TaskTimeline> answers;
  Waiter w;
  w.what = collect ? "collecting the timeline" : "starting the timeline";
  w.timeout = timeout;
  w.deadline = std::chrono::steady_clock::now() + timeout;
  // Runs on the reply thread under mu_, which also guards sent_us: the send time of a rank is
  // stored (under mu_) before its request is sent, so its answer always finds it.
  w.on_answer = [&](int rank, ControlReply& reply, int64_t received_us) {
    const int64_t offset = reply.task_time_us - (sent_us.at(rank) + received_us) / 2;
    TaskTimeline& t = answers[rank];
    t.rank = rank;
    t.task = task_name(rank);
    t.events = std::move(reply.timeline);
    for (timeline::Event& e : t.events) e.start_us -= offset;
  };
  uint64_t id;
  {
    std::lock_guard lock(mu_);
    if (lost_) std::rethrow_exception(lost_);
    id = next_timeline_id_++;
    for (int r = 0; r < spec_.num_tasks(); ++r)
      if (r != rank_) w.pending.insert(r);
  }
  const auto key = std::make_pair(static_cast<int>(proto::Reply::Kind::TIMELINE), id);
  {
    std::lock_guard lock(mu_);
    waiters_[key] = &w;
  }
  for (int r = 0; r < spec_.num_tasks(); ++r) {
    if (r == rank_) continue;
    const int64_t now = timeline::now_us();
    {
      std::lock_guard lock(mu_);
      sent_us[r] = now;
    }
    send_request(r, [&](capnp::MessageBuilder& b) {
      auto t = b.initRoot<proto::Request>().initTimelineControl();
      t.setId(id);
      t.setEnable(enable);
      t.setCollect(collect);
      t.setChiefTime(now);
    });
  }
  if (std::exception_ptr error = wait_for(w, key)) std::rethrow_exception(error);
  std::vector<TaskTimeline> out;
  std::lock_guard lock(mu_);  // the last answer was stored under it
  for (auto& [rank, t] : answers) out.push_back(std::move(t));
  return out;
}

}  // namespace weft
