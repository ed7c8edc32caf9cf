#include "api/profiler.h"

#include <chrono>
#include <iostream>
#include <mutex>

#include "cluster/cluster.h"
#include "cluster/cluster_runtime.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/timeline.h"
#include "runtime/timeline_format.h"

namespace weft::profiler {

namespace {

// Generous: a task answers from its serve loop even while it runs a step, so only a task that is
// stuck or gone takes long, and a gone one is declared lost sooner by the liveness check.
constexpr std::chrono::milliseconds kAnswerTimeout{30000};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
bool g_started = false;  // guarded by mu()

}  // namespace

void start() {
  std::lock_guard lock(mu());
  if (g_started) throw FailedPrecondition("[profiler] start(): already started; call stop(path) first");
  (void)timeline::take_events();
  if (ClusterRuntime* rt = chief_runtime()) (void)rt->timeline_control(/*enable=*/true, /*collect=*/true, kAnswerTimeout);
  timeline::set_enabled(true);
  g_started = true;
}

void stop(const std::string& path) {
  std::lock_guard lock(mu());
  if (!g_started) throw FailedPrecondition("[profiler] stop(\"" + path + "\"): the profiler was not started");
  g_started = false;
  timeline::set_enabled(false);
  std::vector<timeline::TraceProcess> processes;
  ClusterRuntime* rt = chief_runtime();
  const size_t dropped = timeline::dropped_events();
  processes.push_back({rt ? rt->rank() : 0, local_task_name(), timeline::take_events()});
  if (dropped > 0)
    std::cerr << "weft: [profiler] " << dropped << " events were not kept (the buffer holds " << timeline::kMaxEvents
              << ")\n";
  if (rt)
    for (TaskTimeline& t : rt->timeline_control(/*enable=*/false, /*collect=*/true, kAnswerTimeout))
      processes.push_back({t.rank, std::move(t.task), std::move(t.events)});
  timeline::write_chrome_trace(path, processes);
}

bool started() {
  std::lock_guard lock(mu());
  return g_started;
}

}  // namespace weft::profiler
