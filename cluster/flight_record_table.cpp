// A flight record as text (cluster/flight_record.h): the table weft-inspect prints.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "cluster/flight_record.h"

namespace weft {

namespace {

// Milliseconds from `from` to `to`, taken in double: a damaged file's extreme times must not
// overflow int64.
std::string ms(int64_t to, int64_t from = 0) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", (static_cast<double>(to) - static_cast<double>(from)) / 1000.0);
  return buf;
}

std::string peer_text(const FlightRecordEntry& e) { return e.peer < 0 ? "-" : std::to_string(e.peer); }

// What an entry moved with whom, in words, for the pending summary.
std::string describe(const FlightRecordEntry& e) {
  std::string s = e.kind;
  if (e.group >= 0) s += " of group " + std::to_string(e.group) + " instance " + std::to_string(e.tag) + ", step " +
                         std::to_string(e.step);
  else {
    if (e.peer >= 0) s += (e.kind.find("send") != std::string::npos ? " to rank " : " from rank ") + std::to_string(e.peer);
    if (e.tag >= 0) s += ", tag " + std::to_string(e.tag);
    if (e.step >= 0) s += ", step " + std::to_string(e.step);
  }
  return s + ", " + std::to_string(e.bytes) + " bytes";
}

}  // namespace

std::string format_flight_record(const FlightRecord& record) {
  struct Row {
    const TaskFlightRecord* task;
    const FlightRecordEntry* entry;
  };
  std::vector<Row> rows;
  for (const TaskFlightRecord& t : record.tasks)
    for (const FlightRecordEntry& e : t.entries) rows.push_back({&t, &e});
  // Merged over tasks and ordered by start; within a task, by its own order.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.entry->start_us != b.entry->start_us) return a.entry->start_us < b.entry->start_us;
    if (a.task->rank != b.task->rank) return a.task->rank < b.task->rank;
    return a.entry->seq < b.entry->seq;
  });
  const int64_t origin = rows.empty() ? record.chief_time_us : rows.front().entry->start_us;
  std::string out = "flight record of step " + std::to_string(record.step) + " (" + record.reason + "): " +
                    std::to_string(record.tasks.size()) + " task(s), " + std::to_string(rows.size()) +
                    " entries; times in ms from the earliest entry, on the chief's clock; taken at " +
                    ms(record.chief_time_us, origin) + "\n";
  for (const TaskFlightRecord& t : record.tasks) {
    out += "  rank " + std::to_string(t.rank) + ": " + t.task;
    if (!t.answered) out += "  (did not answer: " + t.why + ")";
    else out += "  (" + std::to_string(t.entries.size()) + " of " + std::to_string(t.recorded) + " recorded kept)";
    out += "\n";
  }
  char line[320];
  std::snprintf(line, sizeof line, "\n%12s %12s %10s %4s %8s  %-9s %-22s %5s %11s %12s  %s\n", "start", "end", "took",
                "rank", "seq", "state", "kind", "peer", "tag/inst", "bytes", "group/step");
  out += line;
  for (const Row& r : rows) {
    const FlightRecordEntry& e = *r.entry;
    const bool pending = e.state == "pending";
    const std::string end = pending ? "-" : ms(e.end_us, origin);
    const std::string took = pending ? ms(record.chief_time_us, e.start_us) + "+" : ms(e.end_us, e.start_us);
    const std::string group = e.group >= 0 ? std::to_string(e.group) + "/" + std::to_string(e.step) : "";
    std::snprintf(line, sizeof line, "%12s %12s %10s %4d %8" PRIu64 "  %-9s %-22s %5s %11d %12" PRIu64 "  %s%s\n",
                  ms(e.start_us, origin).c_str(), end.c_str(), took.c_str(), r.task->rank, e.seq,
                  pending ? "PENDING" : e.state.c_str(), e.kind.c_str(), peer_text(e).c_str(), e.tag, e.bytes,
                  group.c_str(), pending ? "  <-- never finished" : "");
    out += line;
  }
  // What each task still waited for: usually the answer to "who is stuck on whom".
  std::string pending_text;
  for (const TaskFlightRecord& t : record.tasks) {
    std::string mine;
    for (const FlightRecordEntry& e : t.entries)
      if (e.state == "pending")
        mine += "    " + describe(e) + ": pending " + ms(record.chief_time_us, e.start_us) + " ms (since " +
                ms(e.start_us, origin) + ")\n";
    if (!mine.empty()) pending_text += "  rank " + std::to_string(t.rank) + " " + t.task + ":\n" + mine;
  }
  out += pending_text.empty() ? "\nnothing was pending when the record was taken\n"
                              : "\nstill pending when the record was taken:\n" + pending_text;
  std::string silent;
  for (const TaskFlightRecord& t : record.tasks)
    if (!t.answered) silent += "  rank " + std::to_string(t.rank) + " " + t.task + ": " + t.why + "\n";
  if (!silent.empty()) out += "tasks that did not answer (their transfers are unknown):\n" + silent;
  return out;
}

}  // namespace weft
