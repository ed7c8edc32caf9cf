// A checkpoint when the job is told to stop, as TensorFlow's PreemptionCheckpointHandler: a
// scheduler that preempts a job sends SIGTERM (Kubernetes, Slurm, a cloud's spot VMs), and the
// job saves its training state at the next step boundary before it goes.
//
//   CheckpointManager manager(ckpt, "run", 3);
//   manager.restore_or_initialize();                        // a restarted job resumes here
//   distribute::PreemptionCheckpoint preemption(manager);   // installs SIGTERM/SIGINT handling
//   for (...) { step(x, y); preemption.save_if_preempted(); }
//
// - SIGTERM or SIGINT to any task of the job (a task tells the chief: cluster/job_signals.h) marks
//   the job preempted. The next save_if_preempted() on the chief saves a checkpoint through the
//   manager, prints its path, and ends the job: every process exits, the chief with status 128 +
//   the signal's number (143 for SIGTERM), as a process the signal had killed. Non-zero because
//   the job did not finish: a scheduler, or `weft-launch --max-restarts`, starts it again, and
//   restore_or_initialize() resumes from the checkpoint with the losses an uninterrupted job has.
// - Bounded: when no save_if_preempted() comes within the grace period (a step that hangs, a
//   loop that never calls it), the job ends without a checkpoint, by the same status. A second
//   signal to the same process ends the job at once.
// - Without a PreemptionCheckpoint a signal ends the job at once. One per process, on the chief
//   (the other tasks serve inside cluster::init); in a program without a cluster it works alike.
#pragma once

#include <cstdint>

namespace weft {
class CheckpointManager;
}

namespace weft::distribute {

struct PreemptionCheckpointOptions {
  // How long after the signal the next step boundary may come, the save included.
  int64_t grace_period_ms = 30000;
};

class PreemptionCheckpoint {
 public:
  // `manager` is not owned; it must outlive this. FailedPrecondition when one exists already.
  explicit PreemptionCheckpoint(CheckpointManager& manager, PreemptionCheckpointOptions options = {});
  // Signals end the job at once again; one still waiting for its step boundary does now.
  ~PreemptionCheckpoint();
  PreemptionCheckpoint(const PreemptionCheckpoint&) = delete;
  PreemptionCheckpoint& operator=(const PreemptionCheckpoint&) = delete;

  // At a step boundary: after a signal, saves and ends the job (does not return); otherwise
  // returns at once (one atomic load).
  void save_if_preempted();
  // Whether a signal came and the job waits for its step boundary.
  bool preempted() const;

 private:
  CheckpointManager& manager_;
};

}  // namespace weft::distribute
