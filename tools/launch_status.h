// The job's exit status under `mpirun --enable-recovery`. With recovery on, Open MPI 4.1's mpirun
// exits 0 however its processes ended (even when every one exits 3, or one calls MPI_Abort), so
// weft-launch would report success for a job whose lost task the chief had just named. So each
// task runs under a small wrapper (weft-launch itself, in task mode) that starts the program,
// waits for it, and leaves its exit status in a folder weft-launch made; weft-launch then exits
// with the first non-zero status by rank, or non-zero for a task that left none (killed with its
// wrapper). Under srun, which reports its tasks' statuses itself, no wrapper is used.
//
//   parent:  StatusDir dir;  cmd = mpirun ... SELF --task-status DIR PROGRAM ARGS...
//            int rc = run_and_wait(cmd); rc = job_status(rc, dir.path, np, all_local);
//   task:    return run_task(dir, {PROGRAM, ARGS...});   // exits as the program did
//
// The wrapper passes SIGINT, SIGTERM and SIGHUP on to the program, and the program dies with its
// wrapper (PR_SET_PDEATHSIG), so mpirun's signals and kills reach it as before.
#pragma once

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
// ended it) to `dir`/rank.R (R from OMPI_COMM_WORLD_RANK or PMIX_RANK) and returns it.
int run_task(const std::string& dir, const std::vector<std::string>& program);

// Runs `cmd` as a child, passing SIGINT, SIGTERM and SIGHUP on; returns its status as run_task does.
int run_and_wait(const std::vector<std::string>& cmd);

// The job's status: `launcher_status` when it is not 0; else the first non-zero task status by
// rank, printed ("weft-launch: task rank R exited with status S"); else, where every task ran on
// this machine (`all_local`), 1 for a rank that left no status. 0 when every task succeeded.
int job_status(int launcher_status, const std::string& dir, int np, bool all_local);

}  // namespace weft::tools
