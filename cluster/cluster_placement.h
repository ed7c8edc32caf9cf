// Where a graph may run in a cluster, described once by the cluster for the graph compiler
// (scheduler/graph_compiler.h): Session and DataParallel both take this instead of each reading
// the chief's runtime (cluster/cluster_runtime.h) and filling CompileOptions by themselves.
//
//   ExecutionTarget target = execution_target(cluster);
//   CompileOptions o{.name = "Session"};
//   target.apply(o);              // devices, tasks, host device; the caller sets its deadlines
//   ... a step with collectives failed: target.reset_collectives();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device_info.h"
#include "scheduler/graph_compiler.h"

namespace weft {

class Cluster;
class ClusterRuntime;

class ExecutionTarget {
 public:
  ExecutionTarget();
  ~ExecutionTarget();
  ExecutionTarget(ExecutionTarget&&) noexcept;
  ExecutionTarget& operator=(ExecutionTarget&&) noexcept;

  // Whether graphs span other processes; when not, everything below describes this process.
  bool spans_tasks() const { return remote_ != nullptr; }
  // Every device a graph may be placed on (the cluster's, or this process's).
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  // Full task names in rank order, and this process's rank among them.
  const std::vector<std::string>& task_names() const { return task_names_; }
  int rank() const { return rank_; }
  // Where feeds and fetches live: this process's CPU, by its cluster name ("" alone).
  const std::string& host_device() const { return host_device_; }

  // Makes `o` place over the cluster and run other tasks' partitions there. Leaves `o` as it is
  // when graphs do not span tasks. Where graphs run, not how long steps may take: the step's
  // deadlines are the caller's options.
  void apply(CompileOptions& o) const;
  // Every task resets its collectives together: after a failed step that ran collectives, whose
  // groups are then interrupted. Unavailable when a task does not take part in time.
  void reset_collectives() const;

 private:
  friend ExecutionTarget execution_target(const Cluster& cluster);
  ClusterRuntime* runtime_ = nullptr;     // not owned; null: this one process
  std::unique_ptr<RemoteTasks> remote_;  // one session on the cluster's tasks for every graph
  std::vector<DeviceInfo> devices_;
  std::vector<std::string> task_names_;
  int rank_ = 0;
  std::string host_device_;
};

// The cluster's description for one user of it (each Session or DataParallel takes its own: the
// remote tasks' session is released with it). A cluster of one process spans no tasks.
ExecutionTarget execution_target(const Cluster& cluster);

}  // namespace weft
