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
// The wrapper passes SIGINT, SIGTERM and SIGHUP on to the program, and the program dies with its
// wrapper (PR_SET_PDEATHSIG), so mpirun's signals and kills reach it as before. It also leaves its
// process id in the folder while the program runs, so weft-launch can hand a signal it gets to
// every task itself (mpirun would kill them a second after passing it on).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace weft::tools {

// The hidden option of task mode.
inline constexpr const char* kTaskStatusOption = "--task-status";

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
// ended it) to `dir`/rank.R (R from OMPI_COMM_WORLD_RANK or PMIX_RANK) and returns it. Meanwhile
// `dir`/pid.R holds this wrapper's process id.
int run_task(const std::string& dir, const std::vector<std::string>& program);

// Starts `argv` as a child that dies with this process (PR_SET_PDEATHSIG), with `unblock`
// unblocked in it; throws Unavailable when it cannot fork.
pid_t start_child(const std::vector<std::string>& argv, const sigset_t* unblock = nullptr);
// A status of waitpid as run_task reports it: the exit code, or 128 + the signal.
int exit_status(int wait_status);

// The wrappers in `dir` whose programs still run (pid.R without rank.R), and how many wrote a pid.
struct TaskWrappers {
  std::vector<pid_t> running;
  int started = 0;
};
TaskWrappers task_wrappers(const std::string& dir, int np);

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
