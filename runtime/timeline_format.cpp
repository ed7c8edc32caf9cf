#include "runtime/timeline_format.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/file_io.h"

namespace weft::timeline {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& sender, const std::string& why) {
  throw InvalidArgument("[timeline] damaged events from " + sender + ": " + why);
}

const std::string& bounded_string(const json& j, const std::string& sender, const char* what) {
  if (!j.is_string()) bad(sender, std::string(what) + " is not a string");
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() > kMaxStringBytes) bad(sender, std::string(what) + " of " + std::to_string(s.size()) + " bytes");
  return s;
}

int64_t integer(const json& j, const std::string& sender, const char* what) {
  if (!j.is_number_integer()) bad(sender, std::string(what) + " is not an integer");
  return j.get<int64_t>();
}

// What decode_events accepts: longer strings are cut, further arguments left out.
std::string clip(const std::string& s) { return s.size() <= kMaxStringBytes ? s : s.substr(0, kMaxStringBytes); }

}  // namespace

std::string encode_events(const std::vector<Event>& events) {
  json out = json::array();
  for (const Event& e : events) {
    json args = json::array();
    for (size_t i = 0; i < e.args.size() && i < kMaxArgs; ++i) {
      args.push_back(clip(e.args[i].first));
      args.push_back(clip(e.args[i].second));
    }
    out.push_back(json::array({clip(e.name), clip(e.category), clip(e.track), e.start_us,
                               std::max<int64_t>(0, e.duration_us), std::move(args)}));
  }
  // Names come from graphs and may hold any bytes: replace what is not UTF-8 instead of throwing.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<Event> decode_events(std::string_view bytes, const std::string& sender) {
  if (bytes.size() > kMaxEncodedBytes) bad(sender, std::to_string(bytes.size()) + " bytes");
  json parsed = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) bad(sender, "not JSON");
  if (!parsed.is_array()) bad(sender, "not a list of events");
  if (parsed.size() > kMaxEvents) bad(sender, std::to_string(parsed.size()) + " events");
  std::vector<Event> out;
  out.reserve(parsed.size());
  for (const json& j : parsed) {
    if (!j.is_array() || j.size() != 6) bad(sender, "an event that is not a list of 6 fields");
    Event e;
    e.name = bounded_string(j[0], sender, "a name");
    e.category = bounded_string(j[1], sender, "a category");
    e.track = bounded_string(j[2], sender, "a track");
    e.start_us = integer(j[3], sender, "a start");
    e.duration_us = integer(j[4], sender, "a duration");
    if (e.duration_us < 0) bad(sender, "a negative duration");
    const json& args = j[5];
    if (!args.is_array() || args.size() % 2 != 0 || args.size() > 2 * kMaxArgs)
      bad(sender, "arguments that are not a list of key and value pairs");
    for (size_t i = 0; i < args.size(); i += 2)
      e.args.emplace_back(bounded_string(args[i], sender, "an argument"),
                          bounded_string(args[i + 1], sender, "an argument"));
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// Splits one device's events into tracks on which events nest or are disjoint, as trace viewers
// draw them. Each lane keeps the end times of its open events as a stack.
std::vector<int> assign_lanes(const std::vector<const Event*>& events) {
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (events[a]->start_us != events[b]->start_us) return events[a]->start_us < events[b]->start_us;
    return events[a]->duration_us > events[b]->duration_us;  // the enclosing one first
  });
  std::vector<std::vector<int64_t>> open;  // per lane
  std::vector<int> lane(events.size(), 0);
  for (size_t i : order) {
    const int64_t start = events[i]->start_us, end = start + events[i]->duration_us;
    size_t l = 0;
    for (; l < open.size(); ++l) {
      std::vector<int64_t>& stack = open[l];
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      if (stack.empty() || stack.back() >= end) break;
    }
    if (l == open.size()) open.emplace_back();
    open[l].push_back(end);
    lane[i] = static_cast<int>(l);
  }
  return lane;
}

}  // namespace

std::string chrome_trace_json(const std::vector<TraceProcess>& processes) {
  json trace = json::array();
  for (const TraceProcess& p : processes) {
    trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
    trace.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"sort_index", p.pid}}}});
    std::map<std::string, std::vector<const Event*>> by_track;
    for (const Event& e : p.events) by_track[e.track].push_back(&e);
    int next_tid = 1;
    for (const auto& [track, events] : by_track) {
      const std::vector<int> lanes = assign_lanes(events);
      const int num_lanes = lanes.empty() ? 1 : *std::max_element(lanes.begin(), lanes.end()) + 1;
      for (int l = 0; l < num_lanes; ++l) {
        const std::string name = l == 0 ? track : track + " #" + std::to_string(l + 1);
        trace.push_back(
            {{"ph", "M"}, {"name", "thread_name"}, {"pid", p.pid}, {"tid", next_tid + l}, {"args", {{"name", name}}}});
        trace.push_back({{"ph", "M"},
                         {"name", "thread_sort_index"},
                         {"pid", p.pid},
                         {"tid", next_tid + l},
                         {"args", {{"sort_index", next_tid + l}}}});
      }
      for (size_t i = 0; i < events.size(); ++i) {
        const Event& e = *events[i];
        json args = json::object();
        for (const auto& [key, value] : e.args) args[key] = value;
        trace.push_back({{"ph", "X"},
                         {"name", e.name},
                         {"cat", e.category},
                         {"pid", p.pid},
                         {"tid", next_tid + lanes[i]},
                         {"ts", e.start_us},
                         {"dur", e.duration_us},
                         {"args", std::move(args)}});
      }
      next_tid += num_lanes;
    }
  }
  json out = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes) {
  const std::string text = chrome_trace_json(processes);
  write_file_atomically(path, {{text.data(), text.size()}}, "profiler");
}

}  // namespace weft::timeline
