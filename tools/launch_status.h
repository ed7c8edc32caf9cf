// The job's exit status under `mpirun --enable-recovery`. With recovery on, Open MPI 4.1's mpirun
// exits 0 however its processes ended (even when every one exits 3, or one calls MPI_Abort), so
// weft-launch would report success for a job whose lost task the chief had just named. So each
// task runs under a small wrapper (weft-launch itself, in task mode) that starts the program,
// waits for it, and leaves its exit status in a folder weft-launch made; weft-launch then exits
// with the first non-zero status by rank, or non-zero for a task that left none (killed with its
// wrapper). Under srun, which reports its tasks' statuses itself, no wrapper is used.
//
//   parent:  StatusDir dir;  cmd = mpirun ... SELF --task-status DIR PROGRAM ARGS...
//            JobOutcome out = job_status(run_job(...), dir.path, np, all_local);  // tools/launch_job.h
//   task:    return run_task(dir, {PROGRAM, ARGS...});   // exits as the program did
//
// The wrapper passes SIGINT, SIGTERM and SIGHUP on to the program, and SIGUSR1 and SIGUSR2 as
// SIGINT and SIGTERM: weft-launch's stop signals, which mpirun forwards to every process on every
// host (tools/launch_job.h). The program dies with its wrapper (PR_SET_PDEATHSIG), so mpirun's
// kills reach it as before.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace weft::tools {

// The hidden option of task mode.
inline constexpr const char* kTaskStatusOption = "--task-status";
// What weft-launch sends mpirun for a SIGINT and a SIGTERM to every task: signals mpirun forwards
// to its processes (Open MPI's default ess_base_forward_signals) instead of ending the job.
inline constexpr int kForwardedSigint = SIGUSR1;
inline constexpr int kForwardedSigterm = SIGUSR2;

// A fresh folder under $TMPDIR (or /tmp), removed with its contents on destruction.
class StatusDir {
 public:
  StatusDir();
  ~StatusDir();
  StatusDir(const StatusDir&) = delete;
  StatusDir& operator=(const StatusDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Task mode: runs `program` (argv), writes its status (the exit code, or 128 + the signal that
// ended it) to `dir`/rank.R (R from OMPI_COMM_WORLD_RANK or PMIX_RANK) and returns it.
int run_task(const std::string& dir, const std::vector<std::string>& program);

// Starts `argv` as a child that dies with this process (PR_SET_PDEATHSIG), with `unblock`
// unblocked in it; throws Unavailable when it cannot fork.
pid_t start_child(const std::vector<std::string>& argv, const sigset_t* unblock = nullptr);
// A status of waitpid as run_task reports it: the exit code, or 128 + the signal.
int exit_status(int wait_status);


// How a job ended: 0 with no reason when every task succeeded.
struct JobOutcome {
  int status = 0;
  std::string why;  // "task rank 1 exited with status 9", "mpirun exited with status 1"
};
// The job's status: `launcher_status` when it is not 0; else the first non-zero task status by
// rank; else, where every task ran on this machine (`all_local`), 1 for a rank that left no
// status. `launcher` names the launcher in the reason.
JobOutcome job_status(int launcher_status, const std::string& launcher, const std::string& dir, int np, bool all_local);

}  // namespace weft::tools
