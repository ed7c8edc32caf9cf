// The stall watchdog of steps that run in one process (a Session or DataParallel without a cluster;
// a cluster's steps are watched by their chief, cluster/stall_report.h), and the last resort of
// both: a thread that cannot be reclaimed ends the process instead of hanging it.
//
//   StallWatch watch({.owner = "Session", .step_id = 7, .limits = {60s, 600s}},
//                    [&] { return step.in_flight(); }, [&](std::exception_ptr e) { cancel.cancel(e); });
//   ... run the step ...                      // the watch ends with its scope
//
// - Past the stall warning, the watchdog prints what the step runs and waits for (its kernels and
//   asynchronous waits, each with its node and the user's file:line, and for how long):
//     weft: [Session] step 7 stalls: what it runs and waits for 61.2 s in (stall warning 60.0 s; it is ended at 600.0 s):
//         this process:
//           running 61.1 s: node 'slow' (test_sleep) created at train.cpp:40
// - Past the stall timeout it cancels the step with DeadlineExceeded carrying that report: a Recv
//   or a collective that waits is woken with it, and a step of synchronous kernels stops at its
//   next node.
// - A kernel that still has not returned the reclaim grace later (WEFT_STALL_RECLAIM_MS, 10 s by
//   default) holds a thread nothing can take back: the step can never end, and neither could the
//   process's exit, which waits for its threads. The watchdog prints the report and ends the
//   process instead (set_unreclaimable_handler; by default std::_Exit(kUnreclaimableExitStatus)),
//   as PyTorch's NCCL watchdog tears its process down. A cluster installs a handler that ends the
//   job (cluster/cluster.cpp), and arms a reclaim-only watch on a step its chief ended.
//
// The watchdog's thread starts with the first watch, checks every 100 ms while watches come and go,
// and sleeps once none has been made for a while. A watch costs its step two short critical sections
// (made and ended); steps without limits make none.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/executor.h"

namespace weft {

struct StallLimits {
  std::chrono::milliseconds warning{0};  // past it, a report is printed; 0: none
  std::chrono::milliseconds timeout{0};  // past it, the step is cancelled; 0: never
  bool any() const { return warning.count() > 0 || timeout.count() > 0; }
};

// The stall limits every Session and DataParallel starts from: WEFT_STALL_WARNING_MS and
// WEFT_STALL_TIMEOUT_MS, else 60 s and 10 minutes. 0 turns one off.
std::chrono::milliseconds default_stall_warning();
std::chrono::milliseconds default_stall_timeout();
// How long a kernel may take to return once its step was ended: WEFT_STALL_RECLAIM_MS, else 10 s.
std::chrono::milliseconds stall_reclaim_grace();

// What the process exits with when a thread cannot be reclaimed (124: "timed out", as timeout(1)).
inline constexpr int kUnreclaimableExitStatus = 124;

// The lines a stall report gives a process's running nodes: "      running 1.2 s: node ...".
std::string describe_in_flight(std::span<const Executor::RunningStep::InFlight> nodes);
// A report's first line: "step 7 stalls: what it runs and waits for 61.2 s in (...):".
std::string stall_report_heading(int64_t step_id, std::chrono::milliseconds age, const StallLimits& limits);
// "61.2 s".
std::string stall_seconds(std::chrono::milliseconds d);

class StallWatch {
 public:
  struct Options {
    std::string_view owner;  // printed in brackets: "Session"; must outlive the watch
    int64_t step_id = 0;
    StallLimits limits;
    // Only the reclaim check: the step has been ended already (a task's step its chief ended);
    // the grace counts from now.
    bool reclaim_only = false;
  };
  using InFlightFn = std::function<std::vector<Executor::RunningStep::InFlight>()>;
  using CancelFn = std::function<void(std::exception_ptr)>;
  // `in_flight` and `cancel` are called on the watchdog's thread while the watch lives; `cancel`
  // may be null (nothing to cancel: only the reclaim check follows the timeout).
  StallWatch(Options options, InFlightFn in_flight, CancelFn cancel);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // The watchdog's record of the watch (in the watch itself: making one allocates nothing).
  struct Entry {
    Options options;
    InFlightFn in_flight;
    CancelFn cancel;
    std::chrono::steady_clock::time_point started;
    enum class Stage { kRunning, kWarned, kEnded } stage = Stage::kRunning;
    std::chrono::steady_clock::time_point reclaim_by;
  };

 private:
  Entry entry_;
};

// Whether `error` is a DeadlineExceeded: a step ended for running too long (its stall timeout or
// its deadline), whose kernels get the reclaim grace to return.
bool ended_by_deadline(const std::exception_ptr& error);

// What ends the process when a thread cannot be reclaimed, after the report is printed; it must
// not return. Replaces the previous handler (a cluster's ends the whole job).
void set_unreclaimable_handler(std::function<void(const std::string& report)> handler);

}  // namespace weft
