// The timeline: a process-wide recorder of what ran where and when, written out as a Chrome trace
// (runtime/timeline_format.h) that chrome://tracing and ui.perfetto.dev open.
//
//   timeline::set_enabled(true);
//   {
//     timeline::Span span("MatMul_3", "kernel", device_name, {{"op", "MatMul"}});
//     ...                                            // recorded when the scope ends
//   }
//   const int64_t start = timeline::now_us();        // an asynchronous wait: start now,
//   ...                                              // and from the done callback:
//   timeline::record("Recv_1", "recv", device_name, start, timeline::now_us(), {{"op", "Recv"}});
//   std::vector<timeline::Event> events = timeline::take_events();
//
// Off (the default), a Span or a check of enabled() costs one relaxed atomic load and nothing
// else: the executor asks once per node. On, events go into one mutex-protected buffer, bounded at
// kMaxEvents (later ones are counted in dropped_events(), not kept), so a long run recorded by
// mistake cannot exhaust memory. Times are steady_clock microseconds (the clock every process of
// one host shares; across hosts the chief aligns them, cluster/cluster_runtime.h).
//
// Categories in use: "kernel", "send", "recv", "collective", "step". The track is where the event
// happened: a device's full name ("/job:worker/replica:0/task:1/device:CPU:0") or a thread's.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::timeline {

using Args = std::vector<std::pair<std::string, std::string>>;

struct Event {
  std::string name;
  std::string category;
  std::string track;
  int64_t start_us = 0;     // steady_clock, microseconds
  int64_t duration_us = 0;  // >= 0
  Args args;                // shown in the trace viewer's details pane: op type, node, step id
};

inline constexpr size_t kMaxEvents = size_t{1} << 19;

namespace detail {
extern std::atomic<bool> g_enabled;
}

// Whether events are being recorded: the one relaxed load the off path costs.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
// Turns recording on or off. Turning it on does not clear what was recorded before.
void set_enabled(bool on);

// steady_clock now, in microseconds.
int64_t now_us();

// Records a complete event from start_us to end_us (an end before the start records a duration of
// 0). Does nothing when recording is off. Thread-safe.
void record(std::string_view name, std::string_view category, std::string_view track, int64_t start_us,
            int64_t end_us, Args args = {});
// Takes every recorded event out of the buffer, oldest first, and resets dropped_events().
std::vector<Event> take_events();
// Events not kept since the last take_events because the buffer was full.
size_t dropped_events();

// Records [construction, destruction) as one event, when recording was on at construction. The
// strings are copied only then, so a Span over literals costs nothing when off.
class Span {
 public:
  Span(std::string_view name, std::string_view category, std::string_view track, Args args = {});
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  int64_t start_us_ = -1;  // -1: not recording
  Event event_;
};

}  // namespace weft::timeline
