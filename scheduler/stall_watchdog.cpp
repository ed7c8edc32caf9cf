#include "scheduler/stall_watchdog.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "runtime/coarse_clock.h"
#include "runtime/duration_setting.h"
#include "runtime/error.h"

namespace weft {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::chrono::milliseconds default_stall_warning() {
  static const auto v = milliseconds_setting("WEFT_STALL_WARNING_MS", std::getenv("WEFT_STALL_WARNING_MS"),
                                             milliseconds(60000), /*allow_zero=*/true);
  return v;
}

std::chrono::milliseconds default_stall_timeout() {
  static const auto v = milliseconds_setting("WEFT_STALL_TIMEOUT_MS", std::getenv("WEFT_STALL_TIMEOUT_MS"),
                                             milliseconds(600000), /*allow_zero=*/true);
  return v;
}

std::chrono::milliseconds stall_reclaim_grace() {
  static const auto v =
      milliseconds_setting("WEFT_STALL_RECLAIM_MS", std::getenv("WEFT_STALL_RECLAIM_MS"), milliseconds(10000));
  return v;
}

std::string stall_seconds(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1e3);
  return buf;
}

std::string describe_in_flight(std::span<const Executor::RunningStep::InFlight> nodes) {
  std::string out;
  for (const Executor::RunningStep::InFlight& node : nodes)
    out += std::string("      ") + (node.waiting ? "waiting " : "running ") + stall_seconds(milliseconds(node.running_ms)) +
           ": " + node.node + "\n";
  return out;
}

std::string stall_report_heading(int64_t step_id, milliseconds age, const StallLimits& limits) {
  return (step_id > 0 ? "step " + std::to_string(step_id) : std::string("a step")) +
         " stalls: what it runs and waits for " + stall_seconds(age) + " in (" +
         (limits.warning.count() > 0 ? "stall warning " + stall_seconds(limits.warning) : std::string("no stall warning")) +
         (limits.timeout.count() > 0 ? "; it is ended at " + stall_seconds(limits.timeout) : std::string("; no stall timeout")) +
         "):\n";
}


namespace {

class Watchdog {
 public:
  // Never destroyed: a watch may end during the process's exit, after static destructors ran.
  static Watchdog& get() {
    static Watchdog* w = new Watchdog;
    return *w;
  }

  void add(StallWatch::Entry* e) {
    std::lock_guard lock(mu_);
    entries_.push_back(e);
    last_watch_ = e->started;
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    else if (sleeping_) cv_.notify_one();
  }

  // Under the lock: the watchdog never calls a watch's functions while it ends.
  void remove(StallWatch::Entry* e) {
    std::lock_guard lock(mu_);
    entries_.erase(std::find(entries_.begin(), entries_.end(), e));
  }

  void set_handler(std::function<void(const std::string&)> handler) {
    std::lock_guard lock(mu_);
    handler_ = std::move(handler);
  }

 private:
  static constexpr milliseconds kTick{100};
  static constexpr milliseconds kIdleAfter{2000};  // no watch made for this long: sleep until one is

  [[noreturn]] void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (entries_.empty() && now - last_watch_ > kIdleAfter) {
        sleeping_ = true;
        cv_.wait(lock, [&] { return !entries_.empty(); });
        sleeping_ = false;
        continue;
      }
      for (StallWatch::Entry* e : entries_) check(*e, now);
      cv_.wait_for(lock, kTick);
    }
  }

  static std::string compose(StallWatch::Entry& e, Clock::time_point now) {
    const auto age = std::chrono::duration_cast<milliseconds>(now - e.started);
    const std::vector<Executor::RunningStep::InFlight> nodes = e.in_flight();
    const std::string lines = describe_in_flight(nodes);
    const std::string heading =
        e.options.reclaim_only
            ? (e.options.step_id > 0 ? "step " + std::to_string(e.options.step_id) : std::string("a step")) +
                  ", ended, still runs " + stall_seconds(age) + " later:\n"
            : stall_report_heading(e.options.step_id, age, e.options.limits);
    return heading + "    this process:\n" + (lines.empty() ? "      nothing running or waiting\n" : lines);
  }

  void check(StallWatch::Entry& e, Clock::time_point now) {
    using Stage = StallWatch::Entry::Stage;
    const StallLimits& limits = e.options.limits;
    const std::string owner = "[" + std::string(e.options.owner) + "] ";
    if (e.stage == Stage::kRunning && limits.warning.count() > 0 && now - e.started >= limits.warning) {
      e.stage = Stage::kWarned;
      std::cerr << "weft: " << owner << compose(e, now) << std::flush;
    }
    if (e.stage != Stage::kEnded && limits.timeout.count() > 0 && now - e.started >= limits.timeout) {
      e.stage = Stage::kEnded;
      e.reclaim_by = now + stall_reclaim_grace();
      if (e.cancel)
        e.cancel(std::make_exception_ptr(DeadlineExceeded(
            owner + "the step stalled: it ran past its stall timeout of " + std::to_string(limits.timeout.count()) +
            " ms (stall_timeout_ms) and was ended\n  " + compose(e, now))));
      return;
    }
    if (e.stage == Stage::kEnded && now >= e.reclaim_by) {
      const std::string report = compose(e, now);
      const std::string text = owner + "the step was ended " + stall_seconds(stall_reclaim_grace()) +
                               " ago, but a kernel of it has not returned (WEFT_STALL_RECLAIM_MS): its thread "
                               "cannot be reclaimed, so the process ends instead of hanging\n  " + report;
      std::cerr << "weft: " << text << std::flush;
      if (handler_) handler_(text);
      std::fflush(stderr);
      std::_Exit(kUnreclaimableExitStatus);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StallWatch::Entry*> entries_;
  bool started_ = false;
  Clock::time_point last_watch_{};
  bool sleeping_ = false;
  std::function<void(const std::string&)> handler_;
};

}  // namespace

StallWatch::StallWatch(Options options, InFlightFn in_flight, CancelFn cancel)
    // The coarse clock (within 100 ms) spares every watched step a clock read.
    : entry_{std::move(options), std::move(in_flight), std::move(cancel),
             Clock::time_point(std::chrono::duration_cast<Clock::duration>(milliseconds(coarse_now_ms())))} {
  if (entry_.options.reclaim_only) {
    entry_.stage = Entry::Stage::kEnded;
    entry_.reclaim_by = entry_.started + stall_reclaim_grace();
  }
  Watchdog::get().add(&entry_);
}

StallWatch::~StallWatch() { Watchdog::get().remove(&entry_); }

bool ended_by_deadline(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const DeadlineExceeded&) {
    return true;
  } catch (...) {
    return false;
  }
}

void set_unreclaimable_handler(std::function<void(const std::string& report)> handler) {
  Watchdog::get().set_handler(std::move(handler));
}

}  // namespace weft
