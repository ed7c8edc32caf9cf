// The timeline's events as bytes: a compact form for sending one process's events to another
// (the cluster's chief gathers every task's), and the Chrome trace JSON that chrome://tracing and
// ui.perfetto.dev open.
//
//   std::string wire = timeline::encode_events(timeline::take_events());
//   std::vector<timeline::Event> back = timeline::decode_events(wire, "task 1");   // validated
//   timeline::write_chrome_trace("trace.json", {{0, "/job:worker/replica:0/task:0", back}});
//
// The trace: {"traceEvents": [...], "displayTimeUnit": "ms"} with one complete ("ph": "X") event
// per Event, "pid" the process's index with a process_name metadata event naming it, and "tid" a
// track per device or thread with a thread_name metadata event naming it. Trace viewers need the
// events of one tid to nest or be disjoint; a device whose events overlap without nesting (a Recv
// waiting while other kernels run, kernels run in parallel) gets extra tracks "<device> #2", ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/timeline.h"

namespace weft::timeline {

// Bounds on what decode_events accepts from another process.
inline constexpr size_t kMaxEncodedBytes = size_t{128} << 20;
inline constexpr size_t kMaxStringBytes = 4096;
inline constexpr size_t kMaxArgs = 16;

// JSON text: [[name, category, track, start_us, duration_us, [key, value, ...]], ...].
std::string encode_events(const std::vector<Event>& events);
// The events `encode_events` wrote; InvalidArgument naming `sender` for anything else (not JSON,
// wrong shapes or types, a negative duration, strings or counts past the bounds above).
std::vector<Event> decode_events(std::string_view bytes, const std::string& sender);

// One process of a trace.
struct TraceProcess {
  int pid = 0;
  std::string name;  // a task's name, "/job:worker/replica:0/task:1"
  std::vector<Event> events;
};

std::string chrome_trace_json(const std::vector<TraceProcess>& processes);
// Writes chrome_trace_json to `path` (atomically); an error naming the path when it cannot.
void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes);

}  // namespace weft::timeline
