// The chief's side of the profiler (api/profiler.h): recording turned on and off on every task,
// and their events brought onto the chief's clock.
//
// Clocks: steady_clock is shared by the processes of one host but not across hosts. The chief
// notes when it sends each task the request and when the answer arrives; the task notes its own
// clock on receipt. Assuming the two legs take equally long, the task's clock was ahead by
// task_time - (sent + received) / 2, which is taken off each of its events. The error is at most
// half the round trip; of a few samples, the one with the shortest round trip is used (on an
// oversubscribed host one round trip can take milliseconds while the shortest takes tens of us).
//
// At 1000 tasks: one small request per task and one answer each, of size proportional to what the
// task recorded; the chief decodes them one at a time as the progress engine takes the replies. A profile is a rare,
// explicit act, so a linear gather is acceptable here (unlike the per-step path).
#include <map>

#include "cluster/cluster_runtime.h"
#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "runtime/error.h"

namespace weft {

namespace {

// One task's answer to one TimelineControl request.
struct ClockSample {
  int64_t sent_us = 0, received_us = 0;  // on the chief's clock
  int64_t task_us = 0;                   // on the task's, when it got the request
  int64_t round_trip() const { return received_us - sent_us; }
  int64_t offset() const { return task_us - (sent_us + received_us) / 2; }
};

}  // namespace

std::vector<TaskTimeline> ClusterRuntime::timeline_control(bool enable, bool collect,
                                                           std::chrono::milliseconds timeout) {
  if (rank_ != spec_.chief_rank()) throw FailedPrecondition("[profiler] only the chief controls the cluster's timeline");
  std::map<int, ClockSample> best;  // per rank: the sample with the shortest round trip
  std::map<int, TaskTimeline> answers;
  // One request to every other task, and a bounded wait for all their answers.
  auto round = [&](bool with_events) {
    std::map<int, int64_t> sent_us;  // guarded by mu_: the replies' handler reads it
    Waiter w;
    w.what = enable ? "starting the timeline" : "stopping the timeline";
    w.timeout = timeout;
    w.deadline = std::chrono::steady_clock::now() + timeout;
    // Runs on the engine's driving thread under mu_. A rank's send time is stored (under mu_) before its
    // request leaves, so its answer always finds it.
    w.on_answer = [&](int rank, ControlReply& reply, int64_t received_us) {
      const ClockSample sample{sent_us.at(rank), received_us, reply.task_time_us};
      auto [it, first] = best.try_emplace(rank, sample);
      if (!first && sample.round_trip() < it->second.round_trip()) it->second = sample;
      if (!with_events) return;
      TaskTimeline& t = answers[rank];
      t.rank = rank;
      t.task = task_name(rank);
      t.events = std::move(reply.timeline);
    };
    std::pair<int, uint64_t> key;
    {
      std::lock_guard lock(mu_);
      if (lost_) std::rethrow_exception(lost_);
      key = {static_cast<int>(proto::Reply::Kind::TIMELINE), next_timeline_id_++};
      for (int r = 0; r < spec_.num_tasks(); ++r)
        if (r != rank_) w.pending.insert(r);
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
        t.setId(key.second);
        t.setEnable(enable);
        t.setCollect(with_events);
        t.setChiefTime(now);
      });
    }
    if (std::exception_ptr error = wait_for(w, key)) std::rethrow_exception(error);
  };
  if (!collect || enable) {
    // Starting (and discarding what was recorded before): no events worth placing on a clock.
    round(collect);
    return {};
  }
  // A round trip's two legs are rarely equally long on a busy host: the error of one sample is up
  // to half its round trip. The shortest of a few samples bounds it best (as NTP does).
  constexpr int kClockSamples = 4;
  for (int i = 0; i < kClockSamples; ++i) round(false);
  round(true);
  std::vector<TaskTimeline> out;
  std::lock_guard lock(mu_);  // the answers were stored under it
  for (auto& [rank, t] : answers) {
    const int64_t offset = best.at(rank).offset();
    for (timeline::Event& e : t.events) e.start_us -= offset;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace weft
