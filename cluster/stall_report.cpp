#include "cluster/stall_report.h"

#include <cstdio>
#include <cstdlib>

#include "cluster/duration_setting.h"

namespace weft {

namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

TaskStallReport describe_stalled_task(std::span<const Executor::RunningStep* const> steps, const MpiProgressEngine& engine) {
  TaskStallReport out;
  for (const Executor::RunningStep* step : steps)
    for (const Executor::RunningStep::InFlight& node : step->in_flight()) {
      out.lines += std::string("      ") + (node.waiting ? "waiting " : "running ") +
                   seconds(static_cast<double>(node.running_ms) / 1e3) + ": " + node.node + "\n";
      if (node.waiting && node.op.starts_with("Collective")) out.in_collective = true;
    }
  for (const MpiPending& p : engine.pending()) {
    if (p.op.standing) continue;  // a receive always posted for whatever comes: not traffic
    out.lines += "      MPI " + seconds(std::chrono::duration<double>(p.age).count()) + ": " + p.op.kind +
                 (p.op.peer >= 0 ? " with rank " + std::to_string(p.op.peer) : std::string()) +
                 (p.op.tag >= 0 ? ", tag " + std::to_string(p.op.tag) : std::string()) +
                 (p.op.bytes ? ", " + std::to_string(p.op.bytes) + " bytes" : std::string()) +
                 (p.op.what.empty() ? std::string() : ": " + p.op.what) + " (" + p.client + ")\n";
  }
  if (out.lines.empty()) out.lines = "      nothing running or waiting (its part may have ended)\n";
  return out;
}

std::string compose_stall_report(int64_t step_id, std::chrono::milliseconds age, std::chrono::milliseconds warning,
                                 std::chrono::milliseconds timeout, const std::map<std::string, TaskStallReport>& tasks,
                                 const std::vector<std::string>& silent) {
  std::string out = "step " + std::to_string(step_id) + " stalls: what it runs and waits for " +
                    seconds(static_cast<double>(age.count()) / 1e3) + " in (stall warning " +
                    seconds(static_cast<double>(warning.count()) / 1e3) +
                    (timeout.count() > 0 ? "; it is ended at " + seconds(static_cast<double>(timeout.count()) / 1e3)
                                         : std::string("; no stall timeout")) +
                    "):\n";
  std::string in, out_of;
  for (const auto& [task, report] : tasks) {
    out += "    " + task + ":\n" + report.lines;
    (report.in_collective ? in : out_of) += (report.in_collective ? (in.empty() ? "" : ", ") : (out_of.empty() ? "" : ", ")) + task;
  }
  for (const std::string& task : silent) out += "    " + task + ": did not answer the report's request\n";
  if (!in.empty() && !out_of.empty()) out += "    a collective waits: " + in + " in it; not joined: " + out_of + "\n";
  return out;
}

std::chrono::milliseconds default_stall_warning() {
  static const auto v = milliseconds_setting("WEFT_STALL_WARNING_MS", std::getenv("WEFT_STALL_WARNING_MS"),
                                             std::chrono::milliseconds(60000), /*allow_zero=*/true);
  return v;
}

std::chrono::milliseconds default_stall_timeout() {
  static const auto v = milliseconds_setting("WEFT_STALL_TIMEOUT_MS", std::getenv("WEFT_STALL_TIMEOUT_MS"),
                                             std::chrono::milliseconds(600000), /*allow_zero=*/true);
  return v;
}

}  // namespace weft
