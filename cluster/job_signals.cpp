#include "cluster/job_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/device.h"
#include "runtime/error.h"

namespace weft::job_signals {

namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::mutex mu;
  Hooks hooks;
  bool hooked = false;
  bool held = false;
  std::chrono::milliseconds grace{0};
  std::optional<Preempted> pending;  // while held: the signal the checkpoint is for
  Clock::time_point deadline;
  bool finished = false;
  int own_signals = 0;
  // From the MPI progress engine's driver, which must never wait for `mu`: it is held while
  // ending the job, and ending it waits (bounded) for the engine to send.
  std::mutex reports_mu;
  std::deque<Preempted> reports;  // from other tasks, for the watcher thread
  std::atomic<int> end_requested{0};  // the chief said to end with this signal
  std::atomic<bool> any_pending{false};
};

// Never destroyed: the watcher thread may still run while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

int g_pipe[2] = {-1, -1};  // the handler writes signal numbers to [1]; 0 only wakes the watcher
std::once_flag g_installed;

extern "C" void on_signal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  ssize_t ignored = write(g_pipe[1], &byte, 1);  // non-blocking: a full pipe already holds a signal
  (void)ignored;
  errno = saved;
}

void wake() { on_signal(0); }

void say(const std::string& line) {
  const std::string text = "weft: " + line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

// The signal's default action: this process dies by it.
[[noreturn]] void die_by(int signo) {
  std::signal(signo, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(signo);
  _exit(128 + signo);
}

[[noreturn]] void end_now(std::unique_lock<std::mutex>& lock, int signo) {
  State& s = state();
  // Under the lock: uninstall_hooks (before MPI_Finalize) cannot pass while MPI_Abort runs.
  if (s.hooked && s.hooks.end_job) s.hooks.end_job(signo);
  lock.unlock();
  die_by(signo);
}

std::string this_task(State& s) { return s.hooked && !s.hooks.task.empty() ? s.hooks.task : local_task_name(); }

// On the chief (or a process alone), under the lock.
void on_report(std::unique_lock<std::mutex>& lock, const std::string& task, int signo) {
  State& s = state();
  if (s.pending) return;  // the job already ends for a signal
  const std::string got = task + " got " + signal_name(signo);
  if (!s.held) {
    say(got + "; ending the job");
    end_now(lock, signo);
  }
  s.pending = Preempted{task, signo};
  s.deadline = Clock::now() + s.grace;
  s.any_pending = true;
  say(got + "; saving a checkpoint at the next step boundary (within " + std::to_string(s.grace.count()) +
      " ms), then ending the job");
}

void on_own_signal(int signo) {
  State& s = state();
  std::unique_lock lock(s.mu);
  const std::string task = this_task(s);
  if (++s.own_signals > 1) {
    say(task + " got " + signal_name(signo) + " again; ending the job now");
    end_now(lock, signo);
  }
  if (!s.hooked && !s.held) die_by(signo);  // nothing of weft's is under way yet (or any more)
  if (s.hooked && s.hooks.tell_chief) {
    say(task + " got " + signal_name(signo) + "; telling the chief, which ends the job");
    const auto tell = s.hooks.tell_chief;
    lock.unlock();
    tell(signo);
    return;
  }
  on_report(lock, task, signo);
}

void watch() {
  State& s = state();
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard lock(s.mu);
      if (s.held && s.pending && !s.finished) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(s.deadline - Clock::now()).count();
        timeout_ms = static_cast<int>(std::max<long long>(0, left));
      }
    }
    pollfd p{g_pipe[0], POLLIN, 0};
    if (poll(&p, 1, timeout_ms) > 0) {
      unsigned char bytes[64];
      const ssize_t n = read(g_pipe[0], bytes, sizeof(bytes));
      for (ssize_t i = 0; i < n; ++i)
        if (bytes[i] != 0) on_own_signal(bytes[i]);
    }
    std::deque<Preempted> reports;
    {
      std::lock_guard queue(s.reports_mu);
      reports.swap(s.reports);
    }
    std::unique_lock lock(s.mu);
    if (s.end_requested && s.hooked) end_now(lock, s.end_requested);
    for (const Preempted& r : reports)
      if (s.hooked) on_report(lock, r.task, r.signo);
    if (s.held && s.pending && !s.finished && Clock::now() >= s.deadline) {
      say("no step boundary came within the grace period of " + std::to_string(s.grace.count()) + " ms after " +
          s.pending->task + " got " + signal_name(s.pending->signo) + "; ending the job without a checkpoint");
      end_now(lock, s.pending->signo);
    }
  }
}

void install_handlers() {
  std::call_once(g_installed, [] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) throw Internal("[signals] cannot make a pipe");
    fcntl(g_pipe[1], F_SETFL, fcntl(g_pipe[1], F_GETFL) | O_NONBLOCK);
    std::thread(watch).detach();
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT}) sigaction(sig, &sa, nullptr);
  });
}

}  // namespace

std::string signal_name(int signo) {
  if (signo == SIGTERM) return "SIGTERM";
  if (signo == SIGINT) return "SIGINT";
  return "signal " + std::to_string(signo);
}

void install(Hooks hooks) {
  install_handlers();
  State& s = state();
  std::lock_guard lock(s.mu);
  s.hooks = std::move(hooks);
  s.hooked = true;
}

void uninstall_hooks() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.hooked = false;
  s.hooks = {};
}

void report(const std::string& task, int signo) {
  State& s = state();
  {
    std::lock_guard queue(s.reports_mu);
    s.reports.push_back({task, signo});
  }
  wake();
}

void end_job(int signo) {
  state().end_requested = signo;
  wake();
}

void hold(std::chrono::milliseconds grace) {
  install_handlers();
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.held) throw FailedPrecondition("[preemption] a PreemptionCheckpoint exists already; one per process");
  s.held = true;
  s.grace = grace;
}

void release() {
  State& s = state();
  std::unique_lock lock(s.mu);
  s.held = false;
  if (s.pending && !s.finished) {
    say(s.pending->task + " got " + signal_name(s.pending->signo) +
        "; the PreemptionCheckpoint went before a step boundary came: ending the job without a checkpoint");
    end_now(lock, s.pending->signo);
  }
}

std::optional<Preempted> preempted() {
  State& s = state();
  if (!s.any_pending.load()) return std::nullopt;
  std::lock_guard lock(s.mu);
  return s.pending;
}

void finish() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.finished = true;
}

}  // namespace weft::job_signals
