// weft::profiler over a cluster (ctest starts it under mpirun with the cluster session tests):
// start() and stop() on the chief record every task, and the trace written on the chief holds
// every task's events on the chief's clock.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "api/weft/weft.h"
#include "runtime/timeline.h"
#include "temp_dir.h"

namespace weft {
namespace {

using nlohmann::json;

std::string worker(int task) { return "/job:worker/task:" + std::to_string(task); }

TEST(ClusterProfiler, TheTraceOnTheChiefHasEveryTasksEventsOnItsClock) {
  int argc = 0;
  char** argv = nullptr;
  const Cluster cluster = cluster::init(argc, argv);  // the one main() started
  ASSERT_GE(cluster.num_tasks(), 3);
  Graph g;
  Tensor x, out;
  {
    GraphScope scope(g);
    x = placeholder(float32, {8, 8}, "x");
    Tensor h;
    {
      DeviceScope on(worker(1));
      h = tanh(matmul(x, x));
    }
    {
      DeviceScope on(worker(2));
      h = matmul(h, x);
    }
    DeviceScope on(worker(0));
    out = reduce_sum(h);
  }
  Session sess(g, cluster);
  const Tensor xs = random::uniform({8, 8}, -1, 1, 3);
  (void)sess.run({{x, xs}}, {out});  // registered on the tasks before recording

  weft::testing::TempDir dir;
  const std::string path = dir.file("trace.json");
  const int64_t begin = timeline::now_us();
  profiler::start();
  for (int i = 0; i < 3; ++i) (void)sess.run({{x, xs}}, {out});
  profiler::stop(path);
  const int64_t end = timeline::now_us();

  std::ifstream in(path);
  const json trace = json::parse(in);
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> tracks;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name") processes[e.at("pid")] = e.at("args").at("name");
    if (e.at("name") == "thread_name") tracks[{e.at("pid"), e.at("tid")}] = e.at("args").at("name");
  }
  for (int t = 0; t < cluster.num_tasks(); ++t) EXPECT_EQ(processes[t], cluster.task_names()[t]) << t;
  std::map<int, std::set<std::string>> categories;  // per pid
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const int pid = e.at("pid");
    const int64_t ts = e.at("ts"), dur = e.at("dur");
    categories[pid].insert(e.at("cat"));
    EXPECT_GE(dur, 0);
    EXPECT_GE(ts, begin) << e.dump();
    EXPECT_LE(ts + dur, end) << e.dump();
    const std::string track = tracks.at({pid, e.at("tid")});
    // Kernels are drawn on the device they ran on, which belongs to the task of their process.
    if (e.at("cat") != "step") {
      EXPECT_EQ(track.rfind(processes[pid] + "/device:", 0), 0u) << track;
    }
  }
  // Task 1 receives x and sends its result; task 2 receives both and sends; the chief receives.
  for (int t : {0, 1, 2}) {
    EXPECT_TRUE(categories[t].contains("kernel")) << t;
    EXPECT_TRUE(categories[t].contains("recv")) << t;
    EXPECT_TRUE(categories[t].contains("step")) << t;
  }
  EXPECT_TRUE(categories[1].contains("send"));
  EXPECT_TRUE(categories[2].contains("send"));
}

}  // namespace
}  // namespace weft
