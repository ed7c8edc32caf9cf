// Replication: the one graph a data-parallel step was traced into (for replica 0) becomes the
// graph of every replica, all of them in one global graph that the graph compiler places,
// partitions by task and device, and ships once (scheduler/graph_compiler.h), as any cluster
// Session graph.
//
// Per replica r, every node of the trace is copied under "replica_<r>/", asks for the replica's
// device, and
//  - reads and writes its own copies of the variables: replica 0 keeps the process's own
//    variables (so the model read on the chief holds the trained values); replica r > 0 uses
//    "replica_<r>/<name>", a variable of the task holding its device;
//  - takes part in the gradient all-reduce as member r of the group;
//  - gets its share of the global batch through its own copies of the trace's arguments.
// The results (scalars: a loss, a metric) are combined on the host as the sum over the replicas
// of result_r * replica_weight_r: the mean over the global batch.
//
// The broadcast graph gives every replica's copies the values of replica 0's variables: run
// before the first step and whenever the chief's variables changed outside the steps.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/distribute/replica_inputs.h"
#include "runtime/graph.h"
#include "runtime/tensor.h"

namespace weft::distribute {

struct ReplicaLayout {
  std::vector<std::string> devices;  // one per replica; replica 0 is this process's
  std::string host_device;          // where feeds and the combined results live
};

// Whether the collectives of these replicas run through NCCL: the build has CUDA (so NCCL), there
// are several replicas, and every one is a GPU (one per task, or several in a task: NCCL's rank is
// the member, and a task's members are issued together, comm/nccl/nccl_collectives.h). Otherwise
// they are host collectives (MPI), to which the GPUs' tensors go through Send/Recv.
bool replicas_use_nccl(const ReplicaLayout& layout);
// A fresh NCCL id (hex) for a new collective group of the replicas when replicas_use_nccl, else
// empty. Called on the chief, once per group: the id travels to every task on the graph's nodes.
std::string nccl_id_for_new_group(const ReplicaLayout& layout);
// A key no other collective group made by this process has: DataParallel objects alive side by
// side never share a group (a group key names one group; its nccl_id its current communicator).
int64_t new_collective_group_key();
// Gives every NCCL collective of `trace` a fresh id, one per distinct id it had (a group keeps its
// key): after a failed step aborted the groups' communicators, the rebuilt graph makes new ones.
// Returns whether there was any.
bool renew_nccl_ids(GraphIR& trace);

// Each variable's copy on each replica, shared by every graph of one DataParallel (a train step
// and an eval step use the same replica variables).
class ReplicaVariables {
 public:
  // The variable replica r uses for `original`: itself for replica 0.
  std::pair<std::string, std::shared_ptr<VariableState>> for_replica(const std::shared_ptr<VariableState>& original,
                                                                     const std::string& original_key, size_t replica,
                                                                     const std::string& device);

 private:
  std::map<const VariableState*, std::string> base_names_;
  std::map<std::string, int> names_used_;
  std::map<std::pair<const VariableState*, size_t>, std::shared_ptr<VariableState>> copies_;
  std::vector<std::shared_ptr<VariableState>> originals_;  // keeps the map's keys alive
};

struct ReplicatedGraph {
  GraphIR graph;
  std::vector<Endpoint> feeds;    // replica-major: replica r's copy of each trace argument
  std::vector<Endpoint> results;  // the combined results
  std::vector<int32_t> targets;   // every replica's side effects (the optimizer's updates)
};

// `trace`: args and results of replica 0's step; `weight_arg`: the index of the replica-weight
// argument among its args. With `inputs`, the replicas read their arguments themselves and the
// graph has no feeds. InvalidArgument when a result is not a floating-point scalar.
ReplicatedGraph replicate(const GraphIR& trace, size_t weight_arg, const ReplicaLayout& layout,
                          ReplicaVariables& variables, const ReplicaInputs& inputs = nullptr);

// Every replica's copy of every variable of `trace` given replica 0's value: a CollectiveBroadcast
// per variable (collective group `group_key`), each member assigning what it receives. Empty graph
// (no targets) when there is one replica. A non-empty `nccl_id` goes on every broadcast node.
ReplicatedGraph broadcast_graph(const GraphIR& trace, const ReplicaLayout& layout, ReplicaVariables& variables,
                                int64_t group_key, const std::string& nccl_id = "");

}  // namespace weft::distribute
