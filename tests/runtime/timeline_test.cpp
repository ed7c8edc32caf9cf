// The timeline recorder (runtime/timeline.h) and its formats (runtime/timeline_format.h).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "runtime/error.h"
#include "runtime/timeline.h"
#include "runtime/timeline_format.h"
#include "temp_dir.h"

namespace weft::timeline {
namespace {

using nlohmann::json;

// Each test starts with recording off and the buffer empty.
class Timeline : public ::testing::Test {
 protected:
  void SetUp() override {
    set_enabled(false);
    (void)take_events();
  }
  void TearDown() override {
    set_enabled(false);
    (void)take_events();
  }
};

TEST_F(Timeline, RecordsNothingWhenOff) {
  EXPECT_FALSE(enabled());
  { Span span("add", "kernel", "/cpu:0"); }
  record("recv", "recv", "/cpu:0", 1, 2);
  EXPECT_TRUE(take_events().empty());
}

TEST_F(Timeline, ASpanRecordsItsScopeWithNameCategoryTrackAndArgs) {
  set_enabled(true);
  const int64_t before = now_us();
  {
    Span span("MatMul_1", "kernel", "/job:worker/replica:0/task:1/device:CPU:0", {{"op", "MatMul"}});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int64_t after = now_us();
  const std::vector<Event> events = take_events();
  ASSERT_EQ(events.size(), 1u);
  const Event& e = events[0];
  EXPECT_EQ(e.name, "MatMul_1");
  EXPECT_EQ(e.category, "kernel");
  EXPECT_EQ(e.track, "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(e.args, (Args{{"op", "MatMul"}}));
  EXPECT_GE(e.start_us, before);
  EXPECT_GE(e.duration_us, 1000);  // it slept 2 ms
  EXPECT_LE(e.start_us + e.duration_us, after);
  EXPECT_TRUE(take_events().empty());  // taken out
}

TEST_F(Timeline, ASpanBegunWhileOffStaysUnrecordedAndOneBegunWhileOnIsKept) {
  {
    Span off("before", "kernel", "t");
    set_enabled(true);
  }
  {
    Span on("during", "kernel", "t");
    set_enabled(false);
  }
  const std::vector<Event> events = take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "during");
}

TEST_F(Timeline, AnAsyncSpanHasItsExplicitStartAndEnd) {
  set_enabled(true);
  record("Recv_3", "recv", "/cpu:0", 100, 350, {{"op", "Recv"}});
  record("backwards", "kernel", "/cpu:0", 500, 400);  // an end before the start: no duration
  const std::vector<Event> events = take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].start_us, 100);
  EXPECT_EQ(events[0].duration_us, 250);
  EXPECT_EQ(events[0].category, "recv");
  EXPECT_EQ(events[1].duration_us, 0);
}

TEST_F(Timeline, ThreadsRecordConcurrently) {
  set_enabled(true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 1000; ++i) Span span("k", "kernel", "thread " + std::to_string(t));
    });
  for (std::thread& t : threads) t.join();
  std::map<std::string, int> per_track;
  for (const Event& e : take_events()) ++per_track[e.track];
  EXPECT_EQ(per_track.size(), 4u);
  for (const auto& [track, n] : per_track) EXPECT_EQ(n, 1000) << track;
}

TEST_F(Timeline, EventsSurviveTheTripBetweenProcesses) {
  const std::vector<Event> events = {{"a", "kernel", "/cpu:0", 10, 5, {{"op", "Add"}, {"node", "a"}}},
                                     {"Recv \"q\"", "recv", "/job:w/task:1", -7, 0, {}}};
  const std::vector<Event> back = decode_events(encode_events(events), "task 1");
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].name, events[i].name);
    EXPECT_EQ(back[i].category, events[i].category);
    EXPECT_EQ(back[i].track, events[i].track);
    EXPECT_EQ(back[i].start_us, events[i].start_us);
    EXPECT_EQ(back[i].duration_us, events[i].duration_us);
    EXPECT_EQ(back[i].args, events[i].args);
  }
}

TEST_F(Timeline, LongStringsAreCutToWhatTheReaderAccepts) {
  const std::string long_name(kMaxStringBytes + 100, 'x');
  const std::vector<Event> back = decode_events(encode_events({{long_name, "kernel", "t", 0, 1, {}}}), "task 1");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].name.size(), kMaxStringBytes);
}

TEST_F(Timeline, DamagedEventsAreInvalidArgumentNamingTheSender) {
  const std::string long_name(kMaxStringBytes + 1, 'x');
  for (const std::string bad : {
           std::string("not json"),
           std::string("{}"),
           std::string("[[1]]"),
           std::string(R"([["a","kernel","t",1,-5,[]]])"),    // negative duration
           std::string(R"([["a","kernel","t",1.5,5,[]]])"),   // not an integer
           std::string(R"([["a","kernel","t",1,5,["op"]]])"),  // a key without a value
           std::string(R"([["a","kernel","t",1,5,[1,2]]])"),
           std::string(R"([[")") + long_name + R"(","kernel","t",1,5,[]]])",
           std::string(R"([["a","kernel","t",1,5,[]],)"),  // cut short
       }) {
    try {
      (void)decode_events(bad, "task 7");
      ADD_FAILURE() << "accepted: " << bad.substr(0, 80);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("task 7"), std::string::npos) << e.what();
    }
  }
}

// Every complete event of the trace, and the names its metadata gives processes and threads.
struct ParsedTrace {
  std::vector<json> complete;
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
};

ParsedTrace parse_trace(const std::string& text) {
  const json trace = json::parse(text);
  ParsedTrace out;
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  for (const json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int pid = e.at("pid"), tid = e.at("tid");
    if (ph == "M" && e.at("name") == "process_name") out.process_names[pid] = e.at("args").at("name");
    if (ph == "M" && e.at("name") == "thread_name") out.thread_names[{pid, tid}] = e.at("args").at("name");
    if (ph == "X") out.complete.push_back(e);
  }
  return out;
}

TEST_F(Timeline, TheChromeTraceHasCompleteEventsOnNamedProcessesAndTracks) {
  const std::string cpu1 = "/job:worker/replica:0/task:1/device:CPU:0";
  const std::vector<TraceProcess> processes = {
      {0, "/job:worker/replica:0/task:0", {{"step 1", "step", "/job:worker/replica:0/task:0", 0, 100, {{"step_id", "1"}}}}},
      {1,
       "/job:worker/replica:0/task:1",
       {{"MatMul", "kernel", cpu1, 10, 20, {{"op", "MatMul"}}}, {"Recv", "recv", cpu1, 5, 50, {{"op", "Recv"}}}}}};
  const ParsedTrace t = parse_trace(chrome_trace_json(processes));
  EXPECT_EQ(t.process_names.at(0), "/job:worker/replica:0/task:0");
  EXPECT_EQ(t.process_names.at(1), "/job:worker/replica:0/task:1");
  ASSERT_EQ(t.complete.size(), 3u);
  std::set<std::string> names;
  for (const json& e : t.complete) {
    for (const char* key : {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}) EXPECT_TRUE(e.contains(key)) << key;
    EXPECT_GE(e.at("dur").get<int64_t>(), 0);
    EXPECT_TRUE(t.thread_names.contains({e.at("pid"), e.at("tid")})) << e.dump();
    names.insert(e.at("name"));
  }
  EXPECT_EQ(names, (std::set<std::string>{"step 1", "MatMul", "Recv"}));
  // The Recv encloses the MatMul: one track holds both.
  for (const json& e : t.complete)
    if (e.at("pid") == 1) EXPECT_EQ(t.thread_names.at({1, e.at("tid")}), cpu1);
}

TEST_F(Timeline, EventsOfOneDeviceThatOverlapWithoutNestingGetTracksOfTheirOwn) {
  const std::string cpu = "/job:localhost/replica:0/task:0/device:CPU:0";
  const ParsedTrace t = parse_trace(chrome_trace_json(
      {{0, "p", {{"Recv", "recv", cpu, 0, 100, {}}, {"Add", "kernel", cpu, 50, 100, {}}, {"Mul", "kernel", cpu, 60, 10, {}}}}}));
  std::map<std::string, int> tid;
  for (const json& e : t.complete) tid[e.at("name")] = e.at("tid");
  EXPECT_NE(tid.at("Recv"), tid.at("Add"));  // Add outlives the Recv it overlaps
  EXPECT_EQ(t.thread_names.at({0, tid.at("Recv")}), cpu);
  EXPECT_EQ(t.thread_names.at({0, tid.at("Add")}), cpu + " #2");
  // Mul nests in Recv (or Add): it shares a track instead of opening a third.
  EXPECT_TRUE(tid.at("Mul") == tid.at("Recv") || tid.at("Mul") == tid.at("Add"));
}

TEST_F(Timeline, AnUnwritableTraceIsAnErrorNamingThePath) {
  const std::string path = "/nonexistent-weft-dir/trace.json";
  try {
    write_chrome_trace(path, {});
    ADD_FAILURE() << "wrote " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(Timeline, AWrittenTraceParsesBack) {
  weft::testing::TempDir dir;
  const std::string path = dir.file("trace.json");
  write_chrome_trace(path, {{0, "p", {{"a", "kernel", "t", 1, 2, {}}}}});
  std::ifstream in(path);
  const json trace = json::parse(in);
  EXPECT_EQ(trace.at("traceEvents").size(), 5u);  // process name and order, thread name and order, the event
}

}  // namespace
}  // namespace weft::timeline
