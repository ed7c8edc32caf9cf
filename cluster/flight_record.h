// A flight record: every task's flight recorder (runtime/flight_recorder.h) as the chief gathered
// it when a step stalled or failed, each task's entries moved onto the chief's clock, written as
// one JSON file that `weft-inspect FILE` prints as a table (format_flight_record).
//
//   {"weft_flight_record": 1, "step": 12, "reason": "stall warning", "chief_time_us": ...,
//    "tasks": [{"rank": 0, "task": "/job:worker/replica:0/task:0", "answered": true,
//               "clock_offset_us": 0, "recorded": 517,
//               "entries": [{"seq": 1, "kind": "header send", "peer": 1, "tag": 7, "bytes": 96,
//                            "group": -1, "step": -1, "start_us": ..., "end_us": ..., "state": "done"}]},
//              {"rank": 2, "task": "...", "answered": false, "why": "lost", "entries": []}]}
//
// Times are microseconds of the chief's steady clock; end_us is 0 while an entry is pending.
// Reading (weft-inspect) treats the file as untrusted: a damaged or foreign file is
// InvalidArgument saying what is wrong, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/flight_recorder.h"

namespace weft {

inline constexpr int kFlightRecordVersion = 1;
// Bounds on what a reader accepts (a task's ring holds at most kMaxFlightRecorderEntries).
inline constexpr size_t kMaxFlightRecordTasks = size_t{1} << 16;
inline constexpr size_t kMaxFlightKindLength = 64;

// One entry as it travels and is stored: the kind and state as text.
struct FlightRecordEntry {
  uint64_t seq = 0;
  std::string kind;
  int32_t peer = -1, tag = -1;
  uint64_t bytes = 0;
  int64_t group = -1, step = -1;
  int64_t start_us = 0, end_us = 0;
  std::string state;  // flight_state_name()
};

FlightRecordEntry to_record_entry(const FlightEntry& e);

struct TaskFlightRecord {
  int rank = 0;
  std::string task;
  bool answered = true;
  std::string why;              // not answered: "lost", "no answer within 2000 ms", ...
  int64_t clock_offset_us = 0;  // taken off the task's times to put them on the chief's clock
  uint64_t recorded = 0;        // entries the task recorded in all (it keeps only the last ones)
  std::vector<FlightRecordEntry> entries;  // oldest first, on the chief's clock
};

struct FlightRecord {
  int64_t step = -1;
  std::string reason;
  int64_t chief_time_us = 0;  // when the chief gathered it
  std::vector<TaskFlightRecord> tasks;
};

std::string flight_record_to_json(const FlightRecord& record);
// Whether `text` looks like a flight record (its opening names the marker field): for
// weft-inspect, deciding what a file is before parsing it.
bool looks_like_flight_record(std::string_view text);
// Parses and checks a flight record: InvalidArgument saying what is wrong ("not JSON at byte 12",
// "tasks[1].entries[3].bytes is not a whole number", "version 7 is not one this build reads").
FlightRecord flight_record_from_json(std::string_view text);

// The record as a table: every task's entries merged and ordered by start, times in ms from the
// earliest, then what was still pending per task and which tasks did not answer.
std::string format_flight_record(const FlightRecord& record);

}  // namespace weft
