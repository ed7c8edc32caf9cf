#include "tools/launch_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "runtime/error.h"
#include "tools/launch_status.h"

namespace weft::tools {

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  return set;
}

std::string name_of(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

void say(const std::string& line) { std::cerr << "weft-launch: " << line << std::endl; }

// A stop signal already pending (one came between two runs of the job), else 0.
int take_pending_stop() {
  const sigset_t stops = stop_signals();
  const timespec now = {0, 0};
  const int sig = sigtimedwait(&stops, nullptr, &now);
  return sig > 0 ? sig : 0;
}

struct Run {
  JobOutcome outcome;
  int signal = 0;
};

Run run_once(const Launch& launch) {
  std::optional<StatusDir> dir;
  std::vector<std::string> cmd = launch.launcher;
  if (launch.mpirun) {
    dir.emplace();
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    cmd.insert(cmd.end(), {self, kTaskStatusOption, dir->path()});
  }
  cmd.insert(cmd.end(), launch.program.begin(), launch.program.end());
  // Blocked here (block_stop_signals), so the wait below sees an exit at once; not in the child.
  sigset_t waits = stop_signals();
  sigaddset(&waits, SIGCHLD);
  const pid_t child = start_child(cmd, &waits);
  Run run;
  int raw = 0, signals = 0;
  for (;;) {
    const pid_t done = waitpid(child, &raw, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) throw Internal(std::string("waitpid: ") + std::strerror(errno));
    const timespec tick = {0, 200'000'000};
    const int sig = sigtimedwait(&waits, nullptr, &tick);
    if (sig <= 0 || sig == SIGCHLD) continue;
    if (!run.signal) run.signal = sig;
    if (++signals == 1 && dir) {
      // Through mpirun, which forwards SIGUSR1 and SIGUSR2 to every process on every host at once
      // without ending the job; each task's wrapper turns it back into the stop signal
      // (tools/launch_status.h). SIGHUP would kill a task alone: the tasks get SIGTERM for it.
      const int to_tasks = sig == SIGINT ? SIGINT : SIGTERM;
      say("got " + name_of(sig) + "; passing " + name_of(to_tasks) + " to every task (through " + launch.launcher[0] +
          ")");
      kill(child, to_tasks == SIGINT ? kForwardedSigint : kForwardedSigterm);
      continue;
    }
    say("got " + name_of(sig) + (signals == 1 ? "; passing it to " : " again; ending the job through ") + launch.launcher[0]);
    kill(child, sig);
  }
  const int status = exit_status(raw);
  if (dir) run.outcome = job_status(status, launch.launcher[0], dir->path(), launch.np, launch.all_local);
  else if (status != 0) run.outcome = {status, launch.launcher[0] + " exited with status " + std::to_string(status)};
  return run;
}

}  // namespace

void block_stop_signals() {
  sigset_t set = stop_signals();
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

LaunchResult run_with_restarts(const Launch& launch, int max_restarts) {
  for (int restart = 0;; ++restart) {
    if (const int sig = take_pending_stop()) {
      say("got " + name_of(sig) + "; not starting the job again");
      return {1, sig};
    }
    const Run run = run_once(launch);
    const JobOutcome& out = run.outcome;
    if (run.signal) {
      if (out.status != 0) say(out.why);
      return {out.status, run.signal};
    }
    if (out.status == 0) return {};
    if (restart >= max_restarts) {
      say(out.why);
      return {out.status, 0};
    }
    say("the job failed (" + out.why + "); restart " + std::to_string(restart + 1) + " of " + std::to_string(max_restarts));
  }
}

void end_by_signal(int signo) {
  std::signal(signo, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(signo);
  _exit(128 + signo);
}

}  // namespace weft::tools
