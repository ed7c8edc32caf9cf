#include "cluster/flight_record.h"

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace weft {

using nlohmann::json;

FlightRecordEntry to_record_entry(const FlightEntry& e) {
  return {e.seq, e.kind, e.peer, e.tag, e.bytes, e.group, e.step, e.start_us, e.end_us, flight_state_name(e.state)};
}

std::string flight_record_to_json(const FlightRecord& record) {
  // Ordered: the marker field comes first, where looks_like_flight_record finds it.
  using ordered = nlohmann::ordered_json;
  ordered tasks = ordered::array();
  for (const TaskFlightRecord& t : record.tasks) {
    ordered entries = ordered::array();
    for (const FlightRecordEntry& e : t.entries)
      entries.push_back({{"seq", e.seq}, {"kind", e.kind}, {"peer", e.peer}, {"tag", e.tag}, {"bytes", e.bytes},
                         {"group", e.group}, {"step", e.step}, {"start_us", e.start_us}, {"end_us", e.end_us},
                         {"state", e.state}});
    ordered task = {{"rank", t.rank}, {"task", t.task}, {"answered", t.answered}, {"clock_offset_us", t.clock_offset_us},
                 {"recorded", t.recorded}, {"entries", std::move(entries)}};
    if (!t.answered) task["why"] = t.why;
    tasks.push_back(std::move(task));
  }
  ordered doc = {{"weft_flight_record", kFlightRecordVersion},
              {"step", record.step},
              {"reason", record.reason},
              {"chief_time_us", record.chief_time_us},
              {"clock", "microseconds of the chief's steady clock; end_us 0: still pending"},
              {"tasks", std::move(tasks)}};
  // Invalid UTF-8 in a reason (an error message) is replaced, not thrown about.
  return doc.dump(1, ' ', false, ordered::error_handler_t::replace) + "\n";
}

bool looks_like_flight_record(std::string_view text) {
  return text.substr(0, 256).find("\"weft_flight_record\"") != std::string_view::npos;
}

namespace {

[[noreturn]] void bad(const std::string& what) { throw InvalidArgument("[flight record] " + what); }

const json& field(const json& object, const char* name, const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) bad(where + " has no '" + name + "'");
  return *it;
}

int64_t integer(const json& object, const char* name, const std::string& where, int64_t lo, int64_t hi) {
  const json& v = field(object, name, where);
  if (!v.is_number_integer()) bad(where + "." + name + " is not a whole number");
  // Unsigned values above int64's range are refused here too.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(where + "." + name + " is out of range");
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) bad(where + "." + name + " = " + std::to_string(n) + " is out of range");
  return n;
}

uint64_t unsigned_integer(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  if (!v.is_number_unsigned()) bad(where + "." + name + " is not a whole number of at least 0");
  return v.get<uint64_t>();
}

std::string text(const json& object, const char* name, const std::string& where, size_t max_length) {
  const json& v = field(object, name, where);
  if (!v.is_string()) bad(where + "." + name + " is not text");
  std::string s = v.get<std::string>();
  if (s.size() > max_length) bad(where + "." + name + " is longer than " + std::to_string(max_length) + " bytes");
  return s;
}

const json& array(const json& object, const char* name, const std::string& where, size_t max_size) {
  const json& v = field(object, name, where);
  if (!v.is_array()) bad(where + "." + name + " is not a list");
  if (v.size() > max_size) bad(where + "." + name + " has more than " + std::to_string(max_size) + " items");
  return v;
}

FlightRecordEntry read_entry(const json& e, const std::string& where) {
  if (!e.is_object()) bad(where + " is not an object");
  FlightRecordEntry out;
  out.seq = unsigned_integer(e, "seq", where);
  out.kind = text(e, "kind", where, kMaxFlightKindLength);
  out.peer = static_cast<int32_t>(integer(e, "peer", where, INT32_MIN, INT32_MAX));
  out.tag = static_cast<int32_t>(integer(e, "tag", where, INT32_MIN, INT32_MAX));
  out.bytes = unsigned_integer(e, "bytes", where);
  out.group = integer(e, "group", where, INT64_MIN, INT64_MAX);
  out.step = integer(e, "step", where, INT64_MIN, INT64_MAX);
  out.start_us = integer(e, "start_us", where, INT64_MIN, INT64_MAX);
  out.end_us = integer(e, "end_us", where, INT64_MIN, INT64_MAX);
  out.state = text(e, "state", where, 16);
  if (out.state != "pending" && out.state != "done" && out.state != "error" && out.state != "cancelled")
    bad(where + ".state '" + out.state + "' is not pending, done, error or cancelled");
  return out;
}

}  // namespace

FlightRecord flight_record_from_json(std::string_view input) {
  json doc;
  try {
    doc = json::parse(input.begin(), input.end());
  } catch (const json::parse_error& e) {
    bad("not JSON: damaged at byte " + std::to_string(e.byte));
  }
  if (!doc.is_object()) bad("not a JSON object");
  if (!doc.contains("weft_flight_record")) bad("no 'weft_flight_record' field: not a flight record");
  const int64_t version = integer(doc, "weft_flight_record", "the record", 0, INT32_MAX);
  if (version != kFlightRecordVersion)
    bad("version " + std::to_string(version) + " is not one this build reads (" + std::to_string(kFlightRecordVersion) + ")");
  FlightRecord out;
  out.step = integer(doc, "step", "the record", -1, INT64_MAX);
  out.reason = text(doc, "reason", "the record", size_t{1} << 20);
  out.chief_time_us = integer(doc, "chief_time_us", "the record", INT64_MIN, INT64_MAX);
  const json& tasks = array(doc, "tasks", "the record", kMaxFlightRecordTasks);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string where = "tasks[" + std::to_string(i) + "]";
    const json& t = tasks[i];
    if (!t.is_object()) bad(where + " is not an object");
    TaskFlightRecord task;
    task.rank = static_cast<int>(integer(t, "rank", where, 0, INT32_MAX));
    task.task = text(t, "task", where, 4096);
    const json& answered = field(t, "answered", where);
    if (!answered.is_boolean()) bad(where + ".answered is not true or false");
    task.answered = answered.get<bool>();
    if (!task.answered) task.why = text(t, "why", where, 4096);
    task.clock_offset_us = integer(t, "clock_offset_us", where, INT64_MIN, INT64_MAX);
    task.recorded = unsigned_integer(t, "recorded", where);
    const json& entries = array(t, "entries", where, kMaxFlightRecorderEntries);
    task.entries.reserve(entries.size());
    for (size_t k = 0; k < entries.size(); ++k)
      task.entries.push_back(read_entry(entries[k], where + ".entries[" + std::to_string(k) + "]"));
    out.tasks.push_back(std::move(task));
  }
  return out;
}

}  // namespace weft
