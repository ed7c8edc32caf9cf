// Stall reports: when a step has run past its stall warning (SessionOptions::stall_warning_ms,
// 60 s by default), the chief asks every task still in the step what it is running and waiting
// for, and prints it; past the stall timeout (10 minutes) the step ends as DeadlineExceeded
// carrying the report. In the manner of PyTorch's NCCL watchdog and Horovod's stall check.
//
//   weft: [cluster] step 12 stalls: what it runs and waits for 61.2 s in (stall warning 60.0 s; it is ended at 600.0 s):
//     /job:worker/replica:0/task:2:
//       running 61.1 s: node 'slow' (test_sleep) created at train.cpp:40
//     /job:worker/replica:0/task:1:
//       waiting 61.1 s: node '_recv_slow_0_from_worker_task2_CPU0' (recv) created at train.cpp:40
//       MPI 61.1 s: header recv from rank 2, tag 7
//     a collective waits: /job:worker/replica:0/task:1 in it; not joined: /job:worker/replica:0/task:2
//
// A task's part comes from its executors (Executor::RunningStep::in_flight: kernels running, and
// asynchronous ones waiting, with their node and the user's file:line) and from its MPI progress
// engine (MpiProgressEngine::pending: every request in flight, its peer, tag, size and age).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "comm/mpi_progress_engine.h"
#include "scheduler/executor.h"
#include "scheduler/stall_watchdog.h"

namespace weft {

struct TaskStallReport {
  std::string lines;           // "      running 1.2 s: node ...\n", one per thing
  bool in_collective = false;  // a collective node waits for its group here
};

// This process's part: what `steps` run and wait for, and what `engine` has in flight.
TaskStallReport describe_stalled_task(std::span<const Executor::RunningStep* const> steps, const MpiProgressEngine& engine);

// The chief's report of one step: `age` since it started, each task's part under its name (tasks
// in `silent` did not answer the report's request), and which tasks a collective waits for.
std::string compose_stall_report(int64_t step_id, std::chrono::milliseconds age, std::chrono::milliseconds warning,
                                 std::chrono::milliseconds timeout, const std::map<std::string, TaskStallReport>& tasks,
                                 const std::vector<std::string>& silent);

}  // namespace weft
