#include "cluster/cluster_placement.h"

#include "cluster/cluster.h"
#include "cluster/cluster_runtime.h"
#include "runtime/device.h"

namespace weft {

ExecutionTarget::ExecutionTarget() = default;
ExecutionTarget::~ExecutionTarget() = default;
ExecutionTarget::ExecutionTarget(ExecutionTarget&&) noexcept = default;
ExecutionTarget& ExecutionTarget::operator=(ExecutionTarget&&) noexcept = default;

ExecutionTarget execution_target(const Cluster& cluster) {
  ExecutionTarget t;
  ClusterRuntime* rt = cluster.runtime_;
  if (rt && rt->spec().num_tasks() > 1) {
    t.runtime_ = rt;
    t.remote_ = rt->session_tasks();
    t.devices_ = rt->devices;
    for (int r = 0; r < rt->spec().num_tasks(); ++r) t.task_names_.push_back(rt->task_name(r));
    t.rank_ = rt->rank();
    t.host_device_ = rt->host_device();
  } else {
    t.devices_ = local_device_infos();
    t.task_names_ = {local_task_name()};
  }
  return t;
}

void ExecutionTarget::apply(CompileOptions& o) const {
  if (!remote_) return;
  o.devices = runtime_->placement_devices();
  o.remote = remote_.get();
  o.host_device = host_device_;
}

void ExecutionTarget::reset_collectives() const {
  if (runtime_) runtime_->reset_collectives();
}

}  // namespace weft
