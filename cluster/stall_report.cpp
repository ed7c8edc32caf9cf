#include "cluster/stall_report.h"

namespace weft {

TaskStallReport describe_stalled_task(std::span<const Executor::RunningStep* const> steps, const MpiProgressEngine& engine) {
  TaskStallReport out;
  for (const Executor::RunningStep* step : steps) {
    const std::vector<Executor::RunningStep::InFlight> nodes = step->in_flight();
    out.lines += describe_in_flight(nodes);
    for (const Executor::RunningStep::InFlight& node : nodes)
      if (node.waiting && node.op.starts_with("Collective")) out.in_collective = true;
  }
  for (const MpiPending& p : engine.pending()) {
    if (p.op.standing) continue;  // a receive always posted for whatever comes: not traffic
    out.lines += "      MPI " + stall_seconds(std::chrono::duration_cast<std::chrono::milliseconds>(p.age)) + ": " + p.op.kind +
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
  std::string out = stall_report_heading(step_id, age, {warning, timeout});
  std::string in, out_of;
  for (const auto& [task, report] : tasks) {
    out += "    " + task + ":\n" + report.lines;
    (report.in_collective ? in : out_of) += (report.in_collective ? (in.empty() ? "" : ", ") : (out_of.empty() ? "" : ", ")) + task;
  }
  for (const std::string& task : silent) out += "    " + task + ": did not answer the report's request\n";
  if (!in.empty() && !out_of.empty()) out += "    a collective waits: " + in + " in it; not joined: " + out_of + "\n";
  return out;
}

}  // namespace weft
