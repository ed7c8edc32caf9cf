// One collective instance as this process issues it to NCCL: the calls of every member of its
// group that lives in this process, gathered before anything is issued.
//
// Why gather: NCCL's rule for several GPUs in one process. The calls of one collective on the
// process's ranks must go in ONE ncclGroupStart/End from one thread; issued one at a time, the
// first may wait inside NCCL for ranks this process has not issued yet (a deadlock). The executor
// runs each replica's collective node as its own asynchronous kernel, whenever its inputs are
// ready, so the nodes of one instance meet here: each arrival adds its part, and the last one makes
// the launch issuable, as a whole (nccl_collectives.cpp issues every part in one group). With one
// GPU per task an instance has one part and is issuable as it arrives: the same path.
//
//   auto l = std::make_shared<NcclGatheredLaunch<Part>>(channel, {0, 2}, "group 7 step 3 instance 0", deadline);
//   dog.watch(l);                                      // cancellable while it gathers
//   if (l->arrive({.member = 2, .part = ..., .done = ...}) == Arrived::kGathered) issue(l);
//
// Every arrival's `done` runs exactly once: at complete(); at fail(), with its own step's error
// when that step was cancelled; or, for an arrival after the launch failed, at once in arrive().
// While it gathers, cancelled() (which the watchdog polls for queued launches) reports a cancelled
// step of any member that came, and, past the deadline, the members still missing: a replica that
// never runs its collective node is an error naming it, never a hang.
//
// Plain C++, no CUDA or NCCL: tests/comm/nccl_gathered_launch_test.cpp drives it on the CPU.
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/nccl/nccl_watchdog.h"
#include "runtime/cancellation.h"
#include "runtime/error.h"

namespace weft {

template <class Part>
class NcclGatheredLaunch : public NcclLaunch {
 public:
  using Clock = std::chrono::steady_clock;
  using Done = std::function<void(std::exception_ptr error)>;
  struct Arrival {
    int member = 0;                               // its index in the group
    CancellationManager* cancellation = nullptr;  // its step's; may be null
    Part part;
    Done done;
  };
  enum class Arrived {
    kWaiting,   // members are still to come
    kGathered,  // this was the last: every part is here, the launch may be issued
    kRefused,   // the launch had already failed: the arrival's done got its error
  };

  // `members`: the group's members in this process, ascending (the parts' order). `what` names the
  // instance in errors ("[CollectiveAllReduce] group 7 step 3 instance 0").
  NcclGatheredLaunch(std::shared_ptr<NcclChannel> channel, std::vector<int> members, std::string what,
                     Clock::time_point deadline)
      : NcclLaunch(std::move(channel)),
        members_(std::move(members)),
        what_(std::move(what)),
        deadline_(deadline),
        arrivals_(members_.size()) {}

  // Adds `a`. InvalidArgument (nothing added, a.done not called) for a member that is not one of
  // `members` or that already came.
  Arrived arrive(Arrival a) {
    std::exception_ptr refused;
    Done done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t i = position(a.member);
      if (arrivals_[i] || refused_[i])
        throw InvalidArgument(what_ + ": member " + std::to_string(a.member) + " came twice");
      ++arrived_;
      if (settled_) {
        refused_[i] = true;
        // A completed launch had every member, so it is always a failure here.
        refused = error_ ? error_ : std::make_exception_ptr(Internal(what_ + ": member came after completion"));
        done = std::move(a.done);
      } else {
        arrivals_[i].emplace(std::move(a));
        if (arrived_ < members_.size()) return Arrived::kWaiting;
        return Arrived::kGathered;
      }
    }
    done(refused);  // `a.part` goes with this frame
    return Arrived::kRefused;
  }

  // Whether every member came (gathered, or refused after a failure).
  bool all_arrived() const {
    std::lock_guard<std::mutex> lock(mu_);
    return arrived_ == members_.size();
  }
  size_t size() const { return members_.size(); }
  int member(size_t i) const { return members_[i]; }
  // Part i (of member(i)); only once arrive() said kGathered, while the launch lives.
  Part& part(size_t i) { return arrivals_[i]->part; }
  const Part& part(size_t i) const { return arrivals_[i]->part; }
  const std::string& what() const { return what_; }

  std::exception_ptr cancelled() const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::optional<Arrival>& a : arrivals_)
      if (a && a->cancellation && a->cancellation->is_cancelled()) return a->cancellation->error();
    if (arrived_ < members_.size() && Clock::now() > deadline_) {
      std::string missing;
      for (size_t i = 0; i < members_.size(); ++i)
        if (!arrivals_[i] && !refused_[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(members_[i]);
      return std::make_exception_ptr(DeadlineExceeded(
          what_ + ": member(s) " + missing + " of this process did not run their collective node within the wait "
                  "for them (their replica is stuck or did not run this step)"));
    }
    return nullptr;
  }

  void complete() override { settle(nullptr); }
  void fail(std::exception_ptr error) override { settle(error); }

 private:
  size_t position(int member) const {
    auto it = std::find(members_.begin(), members_.end(), member);
    if (it == members_.end()) {
      std::string list;
      for (int m : members_) list += (list.empty() ? "" : ", ") + std::to_string(m);
      throw InvalidArgument(what_ + ": member " + std::to_string(member) + " is not one of this process's members (" +
                            list + ")");
    }
    return static_cast<size_t>(it - members_.begin());
  }

  // Runs every arrived done once, outside the lock: each with its own step's error where that
  // step was cancelled, else `error` (null: completed).
  void settle(std::exception_ptr error) {
    std::vector<std::pair<Done, std::exception_ptr>> calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (settled_) return;
      settled_ = true;
      error_ = error;
      for (std::optional<Arrival>& a : arrivals_) {
        if (!a || !a->done) continue;
        std::exception_ptr e = error;
        if (e && a->cancellation && a->cancellation->is_cancelled()) e = a->cancellation->error();
        calls.emplace_back(std::exchange(a->done, nullptr), e);
      }
    }
    for (auto& [done, e] : calls) done(e);
  }

  const std::vector<int> members_;
  const std::string what_;
  const Clock::time_point deadline_;
  mutable std::mutex mu_;
  std::vector<std::optional<Arrival>> arrivals_;  // by position in members_
  std::vector<bool> refused_ = std::vector<bool>(members_.size());
  size_t arrived_ = 0;
  bool settled_ = false;
  std::exception_ptr error_;  // once settled: what later arrivals get
};

}  // namespace weft
