#include "api/distribute/preemption_checkpoint.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/checkpoint/checkpoint_manager.h"
#include "cluster/job_signals.h"
#include "runtime/error.h"

namespace weft::distribute {

PreemptionCheckpoint::PreemptionCheckpoint(CheckpointManager& manager, PreemptionCheckpointOptions options)
    : manager_(manager) {
  if (options.grace_period_ms <= 0)
    throw InvalidArgument("[preemption] grace_period_ms must be positive, not " + std::to_string(options.grace_period_ms));
  job_signals::hold(std::chrono::milliseconds(options.grace_period_ms));
}

PreemptionCheckpoint::~PreemptionCheckpoint() { job_signals::release(); }

bool PreemptionCheckpoint::preempted() const { return job_signals::preempted().has_value(); }

void PreemptionCheckpoint::save_if_preempted() {
  const std::optional<job_signals::Preempted> p = job_signals::preempted();
  if (!p) return;
  // The grace period's deadline still holds while saving: a save that hangs ends the job too,
  // and the previous checkpoint stays whole (saves are atomic).
  const std::string path = manager_.save();
  job_signals::finish();
  const int status = 128 + p->signo;
  const std::string line = "weft: saved " + path + " after " + p->task + " got " + job_signals::signal_name(p->signo) +
                           "; ending the job (status " + std::to_string(status) + ")\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  // Through exit, as at the end of main: the chief shuts the tasks down and finalises MPI.
  std::exit(status);
}

}  // namespace weft::distribute
