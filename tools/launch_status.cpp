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
  if (g_child > 0) kill(g_child, sig);
}

// Starts `argv` as a child that dies with this process; passes the usual stop signals on to it.
pid_t start_child(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Unavailable(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(128 + SIGKILL);  // the parent died before prctl
    execvp(args[0], args.data());
    std::fprintf(stderr, "weft-launch: error: cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  struct sigaction sa = {};
  sa.sa_handler = pass_on;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Internal(std::string("waitpid: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string rank_of_this_task() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return "unknown";
}

}  // namespace

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
  const int status = wait_status(start_child(program));
  // Written whole, then renamed: the launcher never reads half a status.
  const std::string file = dir + "/rank." + rank_of_this_task();
  {
    std::ofstream out(file + ".tmp");
    out << status << "\n";
  }
  std::rename((file + ".tmp").c_str(), file.c_str());
  return status;
}

int run_and_wait(const std::vector<std::string>& cmd) { return wait_status(start_child(cmd)); }

int job_status(int launcher_status, const std::string& dir, int np, bool all_local) {
  if (launcher_status != 0) return launcher_status;
  for (int r = 0; r < np; ++r) {
    std::ifstream in(dir + "/rank." + std::to_string(r));
    int status = 0;
    if (!(in >> status)) {
      if (!all_local) continue;  // its status stayed on its own host
      std::cerr << "weft-launch: task rank " << r << " ended without an exit status (killed?)\n";
      return 1;
    }
    if (status != 0) {
      std::cerr << "weft-launch: task rank " << r << " exited with status " << status << "\n";
      return status;
    }
  }
  return 0;
}

}  // namespace weft::tools
