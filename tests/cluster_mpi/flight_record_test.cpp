// Flight records over a cluster (ctest starts it under mpirun with the cluster session tests): a
// stalled step writes one file on the chief holding every task's transfers, the waiting task's
// Recv among them still pending; weft-inspect prints it; a step that fails writes one too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/weft/weft.h"
#include "cluster/cluster_runtime.h"
#include "cluster/flight_record.h"
#include "cluster_mpi/test_sleep_op.h"
#include "temp_dir.h"

namespace weft {
namespace {

std::string worker(int task) { return "/job:worker/task:" + std::to_string(task); }

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  return out;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs weft-inspect on `path`; its standard output.
std::string inspect(const std::string& path) {
  const std::string command = std::string(WEFT_INSPECT) + " '" + path + "' 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) out += "\n(exit status " + std::to_string(status) + ")";
  return out;
}

// Task 2 sleeps past the stall limits; task 1 waits in a Recv for its tensor, the chief for task 1's.
TEST(ClusterFlightRecord, AStalledStepWritesOneRecordOfEveryTaskWithTheWaitingRecvPending) {
  int argc = 0;
  char** argv = nullptr;
  const Cluster cluster = cluster::init(argc, argv);  // the one main() started
  ASSERT_GE(cluster.num_tasks(), 3);
  testing::TempDir dir("weft_flight");
  ::setenv("WEFT_FLIGHT_RECORDER_DIR", dir.path().c_str(), 1);
  Graph g;
  Tensor ms, out;
  {
    GraphScope scope(g);
    ms = placeholder(float32, {1}, "ms");
    out = testing::sleep_then_double(ms, worker(2), worker(1));
  }
  Session sess(g, cluster, {.stall_warning_ms = 1000, .stall_timeout_ms = 2500});
  EXPECT_EQ(sess.run({{ms, constant(std::vector<float>{1.f}, Shape{1})}}, {out})[0].to_vector<float>(),
            (std::vector<float>{2.f}));
  EXPECT_TRUE(files_in(dir.path()).empty()) << "a record was written for a step that went well";
  ::testing::internal::CaptureStderr();
  EXPECT_THROW((void)sess.run({{ms, constant(std::vector<float>{4000.f}, Shape{1})}}, {out}), DeadlineExceeded);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ::unsetenv("WEFT_FLIGHT_RECORDER_DIR");
  // One file: the stall warning's; the timeout's error is the same step.
  const std::vector<std::string> files = files_in(dir.path());
  ASSERT_EQ(files.size(), 1u) << printed;
  EXPECT_NE(printed.find("weft: flight record of step"), std::string::npos) << printed;
  EXPECT_NE(printed.find(files[0]), std::string::npos) << printed;

  const FlightRecord record = flight_record_from_json(read(files[0]));
  EXPECT_NE(record.reason.find("stall"), std::string::npos) << record.reason;
  ASSERT_EQ(record.tasks.size(), static_cast<size_t>(cluster.num_tasks()));
  for (const TaskFlightRecord& t : record.tasks) {
    EXPECT_TRUE(t.answered) << t.task << ": " << t.why;
    EXPECT_FALSE(t.entries.empty()) << t.task;
    EXPECT_EQ(t.task, "/job:worker/replica:0/task:" + std::to_string(t.rank));
  }
  // Task 1 still waits for task 2's tensor.
  bool waiting = false;
  for (const FlightRecordEntry& e : record.tasks[1].entries)
    waiting |= e.kind == "tensor recv" && e.peer == 2 && e.state == "pending" && e.step == record.step;
  EXPECT_TRUE(waiting) << "task 1's Recv from task 2 is not pending in the record";
  // Transfers that finished have their peer, bytes and both ends on the chief's clock.
  bool finished = false;
  for (const TaskFlightRecord& t : record.tasks)
    for (const FlightRecordEntry& e : t.entries)
      if (e.state == "done" && e.bytes > 0 && e.peer >= 0) {
        finished = true;
        EXPECT_GE(e.end_us, e.start_us) << t.task << " " << e.kind;
        EXPECT_LE(e.start_us, record.chief_time_us + 1000000) << t.task << " " << e.kind;
      }
  EXPECT_TRUE(finished);

  const std::string table = inspect(files[0]);
  EXPECT_NE(table.find("flight record of step " + std::to_string(record.step)), std::string::npos) << table;
  EXPECT_NE(table.find("PENDING"), std::string::npos) << table;
  EXPECT_NE(table.find("still pending when the record was taken"), std::string::npos) << table;
  EXPECT_NE(table.find("tensor recv from rank 2"), std::string::npos) << table;
  EXPECT_EQ(table.find("exit status"), std::string::npos) << table;
  // Let task 2's sleep end before the next test.
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
}

TEST(ClusterFlightRecord, AStepThatFailsWritesARecord) {
  int argc = 0;
  char** argv = nullptr;
  const Cluster cluster = cluster::init(argc, argv);
  testing::TempDir dir("weft_flight");
  ::setenv("WEFT_FLIGHT_RECORDER_DIR", dir.path().c_str(), 1);
  Graph g;
  Tensor ms, out;
  {
    GraphScope scope(g);
    ms = placeholder(float32, {1}, "ms");
    out = testing::sleep_then_double(ms, worker(2), worker(1));
  }
  // A deadline, not a stall: the step fails with DeadlineExceeded, no stall report.
  Session sess(g, cluster, {.operation_timeout_ms = 800});
  ::testing::internal::CaptureStderr();
  EXPECT_THROW((void)sess.run({{ms, constant(std::vector<float>{2000.f}, Shape{1})}}, {out}), DeadlineExceeded);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ::unsetenv("WEFT_FLIGHT_RECORDER_DIR");
  const std::vector<std::string> files = files_in(dir.path());
  ASSERT_EQ(files.size(), 1u) << printed;
  const FlightRecord record = flight_record_from_json(read(files[0]));
  EXPECT_NE(record.reason.find("error: "), std::string::npos) << record.reason;
  EXPECT_EQ(record.tasks.size(), static_cast<size_t>(cluster.num_tasks()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1400));
}

// A loop of failing steps cannot fill a disk: a process writes at most kMaxFlightRecordFiles
// records, says once that it stops, and its later failing steps write nothing. (Last in this
// binary: it uses up the chief's records for the tests after it.)
TEST(ClusterFlightRecord, ALoopOfFailingStepsWritesABoundedNumberOfRecords) {
  int argc = 0;
  char** argv = nullptr;
  const Cluster cluster = cluster::init(argc, argv);
  testing::TempDir dir("weft_flight");
  ::setenv("WEFT_FLIGHT_RECORDER_DIR", dir.path().c_str(), 1);
  Graph g;
  Tensor ms, out;
  {
    GraphScope scope(g);
    ms = placeholder(float32, {1}, "ms");
    DeviceScope on(worker(2));
    out = testing::test_sleep(ms);
  }
  Session sess(g, cluster, {.operation_timeout_ms = 30});
  constexpr int kSteps = ClusterRuntime::kMaxFlightRecordFiles + 4;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < kSteps; ++i)
    EXPECT_THROW((void)sess.run({{ms, constant(std::vector<float>{60.f}, Shape{1})}}, {out}), DeadlineExceeded);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ::unsetenv("WEFT_FLIGHT_RECORDER_DIR");
  const size_t files = files_in(dir.path()).size();
  EXPECT_GE(files, 1u) << printed;
  EXPECT_LE(files, static_cast<size_t>(ClusterRuntime::kMaxFlightRecordFiles)) << printed;
  size_t said = 0;
  for (size_t at = printed.find("no more are written"); at != std::string::npos;
       at = printed.find("no more are written", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << printed;
  // Task 2's sleeps (queued behind one another) end before the binary goes on.
  std::this_thread::sleep_for(std::chrono::milliseconds(60 * kSteps + 500));
}

}  // namespace
}  // namespace weft
