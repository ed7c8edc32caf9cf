// SIGTERM and SIGINT for a whole job: whichever process gets one, every process of the job ends
// within seconds, and the job says which task got which signal.
//
//   job_signals::install({.task = name, .tell_chief = send_to_chief, .end_job = abort_all});
//   job_signals::report(task, SIGTERM);      // the chief: a task said it got SIGTERM
//   job_signals::uninstall_hooks();          // before MPI_Finalize
//
// - A task that is not the chief prints "weft: TASK got SIGTERM; telling the chief" and tells it
//   (`tell_chief`); the chief (or a process alone) prints "weft: TASK got SIGTERM; ending the job"
//   and ends it (`end_job`: it tells every task to end, then each calls MPI_Abort; under mpirun
//   --enable-recovery MPI_Abort ends only its caller). A second signal to the same process ends
//   it at once, whatever else is under way.
// - While a PreemptionCheckpoint holds the signals (hold()), the chief instead marks the job
//   preempted: the program saves a checkpoint at its next step boundary and exits; if it has not
//   called finish() within the grace period, the job is ended without one.
// - The handler only writes the signal's number to a pipe (async-signal-safe); a thread of this
//   module reads it and does the rest, so nothing unsafe runs in the handler, whichever thread
//   the kernel picked to take the signal.
// - Without hooks (no cluster yet, or MPI being finalised), a signal has its default action: the
//   process dies by it, status 128 + the signal's number.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace weft::job_signals {

struct Hooks {
  std::string task;                          // this process's task, for the lines printed
  std::function<void(int signo)> tell_chief; // set on tasks other than the chief
  std::function<void(int signo)> end_job;    // ends every process of the job; never returns
};

// Installs the handlers of SIGTERM and SIGINT and the thread that acts on them (once per process;
// a later call only replaces the hooks).
void install(Hooks hooks);
// From here on this process's signals have their default action (and reports are ignored).
void uninstall_hooks();

// The chief: `task` (this one, or one that told it) got `signo`. Never blocks: safe on the MPI
// progress engine's thread.
void report(const std::string& task, int signo);

// A task: the chief ends the job for a signal; this process ends now (`end_job`), status 128 +
// `signo`. Never blocks.
void end_job(int signo);

// A signal a PreemptionCheckpoint acts on.
struct Preempted {
  std::string task;
  int signo = 0;
};

// Preemption mode (api/distribute/preemption_checkpoint.h): a signal marks the job preempted
// instead of ending it, for at most `grace`. FailedPrecondition when already held. Installs the
// handlers (with no hooks) when nothing did yet: a program without a cluster.
void hold(std::chrono::milliseconds grace);
// Signals end the job at once again (one that came while held and is still pending does now).
void release();
// The pending signal, if the job is preempted; cheap when it is not (one atomic load).
std::optional<Preempted> preempted();
// The checkpoint is saved and the process exits now: the grace period's deadline is disarmed.
void finish();

// "SIGTERM", "SIGINT", or "signal N".
std::string signal_name(int signo);

}  // namespace weft::job_signals
