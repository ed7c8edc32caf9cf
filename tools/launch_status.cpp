#include "tools/launch_status.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/error.h"

namespace weft::tools {

namespace {

pid_t g_child = -1;

void pass_on(int sig) {
  if (g_child <= 0) return;
  // weft-launch's stop signals come through mpirun as SIGUSR1 and SIGUSR2 (tools/launch_job.h).
  if (sig == kForwardedSigint) sig = SIGINT;
  else if (sig == kForwardedSigterm) sig = SIGTERM;
  kill(g_child, sig);
}

// Written whole, then renamed: the launcher never reads half a file.
void write_whole(const std::string& file, const std::string& text) {
  {
    std::ofstream out(file + ".tmp");
    out << text << "\n";
  }
  std::rename((file + ".tmp").c_str(), file.c_str());
}

std::string rank_of_this_task() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return "unknown";
}

}  // namespace

pid_t start_child(const std::vector<std::string>& argv, const sigset_t* unblock) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Unavailable(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (unblock) sigprocmask(SIG_UNBLOCK, unblock, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(128 + SIGKILL);  // the parent died before prctl
    execvp(args[0], args.data());
    std::fprintf(stderr, "weft-launch: error: cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

StatusDir::StatusDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/weft-launch-XXXXXX";
  if (!mkdtemp(pattern.data())) throw Unavailable("cannot make a folder like " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
}

StatusDir::~StatusDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

int run_task(const std::string& dir, const std::vector<std::string>& program) {
  if (program.empty()) throw InvalidArgument(std::string(kTaskStatusOption) + " needs a program");
  const std::string rank = rank_of_this_task();
  // Held until the handler can pass them on: a signal before the child exists would be lost, and
  // SIGUSR1/2's default action would end this wrapper (and with it the program).
  sigset_t passed, before;
  sigemptyset(&passed);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, kForwardedSigint, kForwardedSigterm}) sigaddset(&passed, sig);
  sigprocmask(SIG_BLOCK, &passed, &before);
  struct sigaction sa = {};
  sa.sa_handler = pass_on;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, kForwardedSigint, kForwardedSigterm}) sigaction(sig, &sa, nullptr);
  g_child = start_child(program, &passed);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  int raw = 0;
  while (waitpid(g_child, &raw, 0) < 0)
    if (errno != EINTR) throw Internal(std::string("waitpid: ") + std::strerror(errno));
  const int status = exit_status(raw);
  write_whole(dir + "/rank." + rank, std::to_string(status));
  return status;
}

JobOutcome job_status(int launcher_status, const std::string& launcher, const std::string& dir, int np, bool all_local) {
  if (launcher_status != 0) return {launcher_status, launcher + " exited with status " + std::to_string(launcher_status)};
  for (int r = 0; r < np; ++r) {
    std::ifstream in(dir + "/rank." + std::to_string(r));
    int status = 0;
    if (!(in >> status)) {
      if (!all_local) continue;  // its status stayed on its own host
      return {1, "task rank " + std::to_string(r) + " ended without an exit status (killed?)"};
    }
    if (status != 0) return {status, "task rank " + std::to_string(r) + " exited with status " + std::to_string(status)};
  }
  return {};
}

}  // namespace weft::tools
