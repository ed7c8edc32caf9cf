// Flight record files (cluster/flight_record.h): what is written reads back the same, the table
// marks what was pending, and a damaged or foreign file is InvalidArgument saying what is wrong.
// The control message that carries a task's entries reads back the same and is checked.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <string>

#include "cluster/flight_record.h"
#include "cluster/messages.h"
#include "runtime/error.h"

namespace weft {
namespace {

FlightRecord sample() {
  FlightRecord r;
  r.step = 12;
  r.reason = "stall warning";
  r.chief_time_us = 5'000'000;
  TaskFlightRecord chief{.rank = 0, .task = "/job:worker/replica:0/task:0", .recorded = 2};
  chief.entries.push_back({1, "header send", 1, 0, 96, -1, -1, 1'000'000, 1'000'010, "done"});
  chief.entries.push_back({2, "all-reduce", -1, 0, 4096, 3, 12, 1'000'100, 0, "pending"});
  TaskFlightRecord task1{.rank = 1, .task = "/job:worker/replica:0/task:1", .clock_offset_us = -7, .recorded = 1};
  task1.entries.push_back({1, "tensor recv", 2, -1, 0, -1, 12, 1'000'050, 0, "pending"});
  TaskFlightRecord task2{.rank = 2, .task = "/job:worker/replica:0/task:2", .answered = false,
                         .why = "no answer within 3000 ms"};
  r.tasks = {chief, task1, task2};
  return r;
}

TEST(FlightRecordFile, ReadsBackWhatWasWritten) {
  const std::string text = flight_record_to_json(sample());
  EXPECT_TRUE(looks_like_flight_record(text));
  const FlightRecord r = flight_record_from_json(text);
  EXPECT_EQ(r.step, 12);
  EXPECT_EQ(r.reason, "stall warning");
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[1].clock_offset_us, -7);
  ASSERT_EQ(r.tasks[0].entries.size(), 2u);
  EXPECT_EQ(r.tasks[0].entries[1].kind, "all-reduce");
  EXPECT_EQ(r.tasks[0].entries[1].group, 3);
  EXPECT_EQ(r.tasks[0].entries[1].state, "pending");
  EXPECT_FALSE(r.tasks[2].answered);
  EXPECT_EQ(r.tasks[2].why, "no answer within 3000 ms");
}

TEST(FlightRecordFile, TheTableMergesTasksByTimeAndMarksWhatWasPending) {
  const std::string table = format_flight_record(sample());
  EXPECT_NE(table.find("flight record of step 12 (stall warning)"), std::string::npos) << table;
  // Merged by start: the chief's send, task 1's recv, the chief's all-reduce.
  const size_t send = table.find("header send"), recv = table.find("tensor recv"), reduce = table.find("all-reduce");
  ASSERT_NE(send, std::string::npos);
  EXPECT_LT(send, recv);
  EXPECT_LT(recv, reduce);
  EXPECT_NE(table.find("PENDING"), std::string::npos);
  EXPECT_NE(table.find("tensor recv from rank 2, step 12, 0 bytes: pending"), std::string::npos) << table;
  EXPECT_NE(table.find("all-reduce of group 3 instance 0, step 12"), std::string::npos) << table;
  EXPECT_NE(table.find("task:2: no answer within 3000 ms"), std::string::npos) << table;
}

void expect_refused(const std::string& text, const std::string& says) {
  try {
    (void)flight_record_from_json(text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(FlightRecordFile, DamagedOrForeignFilesAreClearErrors) {
  const std::string good = flight_record_to_json(sample());
  expect_refused(good.substr(0, good.size() / 2), "not JSON: damaged at byte");
  expect_refused("", "not JSON");
  expect_refused("[1, 2]", "not a JSON object");
  expect_refused(R"({"name": "something else"})", "not a flight record");
  expect_refused(R"({"weft_flight_record": 9, "step": 1})", "version 9");
  expect_refused(R"({"weft_flight_record": 1, "step": 1, "reason": "x", "chief_time_us": 0})", "has no 'tasks'");
  expect_refused(R"({"weft_flight_record": 1, "step": 1, "reason": "x", "chief_time_us": 0, "tasks": {}})",
                 "tasks is not a list");
  std::string bad_bytes = good;
  bad_bytes.replace(bad_bytes.find("\"bytes\": 96"), 11, "\"bytes\": -5");
  expect_refused(bad_bytes, "tasks[0].entries[0].bytes is not a whole number");
  std::string bad_state = good;
  bad_state.replace(bad_state.find("\"done\""), 6, "\"weird\"");
  expect_refused(bad_state, "state 'weird'");
  std::string bad_rank = good;
  bad_rank.replace(bad_rank.find("\"rank\": 1"), 9, "\"rank\": \"one\"");
  expect_refused(bad_rank, "tasks[1].rank is not a whole number");
}

TEST(FlightRecordMessage, ATasksEntriesTravelAndAreChecked) {
  std::vector<FlightEntry> entries = {
      {.seq = 4, .kind = "payload recv", .peer = 2, .tag = 9, .bytes = 1 << 20, .start_us = 10, .end_us = 20,
       .state = FlightState::kDone},
      {.seq = 5, .kind = "all-gather", .tag = 1, .bytes = 64, .group = 7, .step = 3, .start_us = 30}};
  capnp::MallocMessageBuilder b;
  auto reply = b.initRoot<proto::Reply>();
  reply.setKind(proto::Reply::Kind::FLIGHT_RECORD);
  reply.setHandle(77);
  reply.setTaskTime(1234);
  reply.setFlightRecorded(5);
  write_flight_entries(entries, reply);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(b);
  const ControlReply r = decode_reply({words.begin(), words.size()}, "task 1");
  EXPECT_EQ(r.kind, proto::Reply::Kind::FLIGHT_RECORD);
  EXPECT_EQ(r.handle, 77u);
  EXPECT_EQ(r.task_time_us, 1234);
  EXPECT_EQ(r.flight_recorded, 5u);
  ASSERT_EQ(r.flight.size(), 2u);
  EXPECT_EQ(r.flight[0].kind, "payload recv");
  EXPECT_EQ(r.flight[0].bytes, 1u << 20);
  EXPECT_EQ(r.flight[0].state, "done");
  EXPECT_EQ(r.flight[1].group, 7);
  EXPECT_EQ(r.flight[1].state, "pending");

  // An unknown state is a damaged message naming the task.
  auto list = reply.getFlight();
  list[0].setState(9);
  const kj::Array<capnp::word> damaged = capnp::messageToFlatArray(b);
  try {
    (void)decode_reply({damaged.begin(), damaged.size()}, "task 1");
    ADD_FAILURE() << "an entry of unknown state was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("task 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
