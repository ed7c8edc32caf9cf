// The cluster: the processes mpirun (or srun) started, one task each. Every process runs the same
// program; task 0, the chief, returns from cluster::init and runs the user's code, while every
// other task serves the chief inside init and exits with it.
//
//   int main(int argc, char** argv) {
//     Cluster cluster = cluster::init(argc, argv);   // MPI; --cluster=spec.json, WEFT_CLUSTER or TF_CONFIG
//     cluster.num_tasks(); cluster.task_names(); cluster.devices();
//     Session sess(g, cluster);                      // places over every task's devices
//   }
//   // mpirun -np 3 ./train   or   weft-launch -np 3 ./train
//
// Without a spec, rank r is /job:worker/replica:0/task:r and task 0 the chief. Without mpirun,
// the cluster is this one process and the same program runs. A spec that does not parse or does
// not match the processes started is an InvalidArgument printed by every task, which then all
// exit non-zero. An error on a task is raised on the chief as the same class, naming the task; a
// task that stops answering is an Unavailable naming it (cluster/cluster_runtime.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device_info.h"

namespace weft {

class ClusterRuntime;
class ExecutionTarget;

class Cluster {
 public:
  Cluster() = default;  // a cluster of this one process, until init
  int num_tasks() const;
  // Full task names in rank order, the chief first: "/job:worker/replica:0/task:0", ...
  std::vector<std::string> task_names() const;
  // Every device of every task, by full name ("/job:worker/replica:0/task:1/device:CPU:0").
  std::vector<DeviceInfo> devices() const;
  int rank() const;
  bool is_chief() const { return rank() == 0; }

  // Every task resets its collectives together (after a failed step that ran collectives, whose
  // groups are then interrupted); Unavailable when a task does not take part in time. Chief only.
  void reset_collectives() const;

 private:
  friend Cluster cluster_from_runtime(ClusterRuntime* runtime);
  // Where graphs over this cluster run (cluster/cluster_placement.h), for Session and DataParallel.
  friend ExecutionTarget execution_target(const Cluster& cluster);
  ClusterRuntime* runtime_ = nullptr;
};

namespace cluster {

// Starts MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE), reads the spec, sets this task's
// devices, and gathers every task's devices on the chief. Returns on the chief only; the other
// tasks serve it here and exit when it finishes or fails. Removes --cluster=FILE from argv.
Cluster init(int& argc, char**& argv);

}  // namespace cluster

// Every task's devices when this process is a cluster's chief (list_devices() returns them), else
// null.
const std::vector<DeviceInfo>* cluster_devices();
// The runtime of the cluster this process is the chief of, when it has other tasks, else null:
// for what acts on the whole cluster without a Cluster object at hand (api/profiler.h).
ClusterRuntime* chief_runtime();

}  // namespace weft
