// weft::profiler in a process without a cluster: start and stop record this process alone.
#include "api/profiler.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/session.h"
#include "runtime/error.h"
#include "temp_dir.h"

namespace weft {
namespace {

using nlohmann::json;

TEST(Profiler, StopWithoutStartIsFailedPrecondition) {
  ASSERT_FALSE(profiler::started());
  EXPECT_THROW(profiler::stop("unused.json"), FailedPrecondition);
}

TEST(Profiler, StartingTwiceIsFailedPrecondition) {
  weft::testing::TempDir dir;
  profiler::start();
  EXPECT_THROW(profiler::start(), FailedPrecondition);
  profiler::stop(dir.file("trace.json"));
  EXPECT_FALSE(profiler::started());
}

TEST(Profiler, AnUnwritablePathIsAnErrorNamingIt) {
  profiler::start();
  const std::string path = "/nonexistent-weft-dir/trace.json";
  try {
    profiler::stop(path);
    ADD_FAILURE() << "wrote " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(profiler::started());  // stopped all the same
}

TEST(Profiler, ASessionsKernelsAppearNamedAfterTheirNodesOnTheirDevice) {
  Graph g;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {2, 2}, "x");
    Tensor w = constant({{1.f, 0.f}, {0.f, 2.f}});
    identity(matmul(matmul(x, w, false, false), w), "y");
  }
  Session sess(g, {.optimize = false});
  const Tensor xs = constant({{1.f, 1.f}, {2.f, 3.f}});
  (void)sess.run({{"x:0", xs}}, {"y:0"});  // planned before: only runs are recorded
  weft::testing::TempDir dir;
  const std::string path = dir.file("trace.json");
  profiler::start();
  for (int i = 0; i < 3; ++i) (void)sess.run({{"x:0", xs}}, {"y:0"});
  profiler::stop(path);
  (void)sess.run({{"x:0", xs}}, {"y:0"});  // not recorded, not written

  std::ifstream in(path);
  const json trace = json::parse(in);
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  std::map<int, std::string> tracks;
  std::map<std::string, int> runs;  // per node
  std::string process;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") tracks[e.at("tid")] = e.at("args").at("name");
    if (e.at("ph") == "M" && e.at("name") == "process_name") process = e.at("args").at("name");
  }
  EXPECT_EQ(process, "/job:localhost/replica:0/task:0");
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_GE(e.at("dur").get<int64_t>(), 0);
    EXPECT_EQ(tracks.at(e.at("tid")), "/job:localhost/replica:0/task:0/device:CPU:0");
    if (e.at("cat") == "kernel") {
      ++runs[e.at("name")];
      EXPECT_EQ(e.at("args").at("node"), e.at("name"));
    }
  }
  EXPECT_EQ(runs["MatMul"], 3);
  EXPECT_EQ(runs["MatMul_1"], 3);
  EXPECT_EQ(runs["y"], 3);
}

}  // namespace
}  // namespace weft
