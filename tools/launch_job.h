// Running a job from weft-launch: its launcher (mpirun or srun) as a child, the signals weft-launch
// gets, and restarts.
//
//   Launch launch = ...;                                  // tools/weft_launch.cpp
//   LaunchResult r = run_with_restarts(launch, /*max_restarts=*/3);
//   // r.signal: weft-launch was told to stop; it ends with that signal's status
//
// Signals. A SIGTERM, SIGINT or SIGHUP (passed on as SIGTERM) to weft-launch goes to every task,
// on every host, so that each task's handling (cluster/job_signals.h, a PreemptionCheckpoint's
// save) runs: weft-launch sends mpirun SIGUSR2 (SIGUSR1 for SIGINT), which mpirun forwards to
// every process at once without ending the job, and each task's wrapper (tools/launch_status.h)
// turns it back into the stop signal. Given the stop signal itself, mpirun would kill its
// processes too soon for a checkpoint (Open MPI 4.1: SIGTERM only after odls_base_sigkill_timeout,
// 1 s, and SIGKILL a timeout later; measured). srun, which forwards SIGTERM to its tasks itself,
// gets the signal; so does the launcher on a second signal. weft-launch waits for the job to end,
// then ends by the same signal (128 + its number) and starts nothing more.
//
// Restarts (torchrun's --max-restarts). A job that failed (any status but 0, a signal to one of
// its tasks included) is started again, up to `max_restarts` times, each time saying why
// ("weft-launch: the job failed (task rank 1 exited with status 9); restart 1 of 3"). The
// program resumes from its newest checkpoint itself (CheckpointManager::restore_or_initialize).
#pragma once

#include <string>
#include <vector>

namespace weft::tools {

struct Launch {
  std::vector<std::string> launcher;  // mpirun or srun and their options
  std::vector<std::string> program;   // the program and its arguments
  int np = 0;
  bool mpirun = false;
  bool all_local = true;              // every task on this machine
};

struct LaunchResult {
  int status = 0;  // the last run's status
  int signal = 0;  // the signal weft-launch got, 0 when none
};

// Call first in main, before any thread starts: weft-launch takes its stop signals with sigwait.
void block_stop_signals();

LaunchResult run_with_restarts(const Launch& launch, int max_restarts);

// Ends this process by `signo`, as if it had not been caught.
[[noreturn]] void end_by_signal(int signo);

}  // namespace weft::tools
