// Collectives between the members of a group: all-reduce, broadcast and all-gather over devices of
// one process and of several. The kernels of CollectiveAllReduce, CollectiveBroadcast and
// CollectiveAllGather (kernels/cpu/collective.cpp) hand their inputs here and complete through a
// callback, holding no thread while they wait.
//
//   CollectiveParams p{.kind = CollectiveKind::kAllReduce, .op = "collective_all_reduce",
//                      .group_key = 1, .members = {dev0, dev1}, .member = 0,
//                      .instance_key = 0, .group_instances = 1};
//   process_collectives().run_async(p, step_id, {grad}, cancellation,
//                                   [](std::exception_ptr e, std::vector<Tensor> out) { ... });
//
// Two stages. (1) The members of this process (several logical CPUs may be members) meet here,
// matched by (group key, step id, instance key); their contributions are combined in MEMBER order,
// so the bits do not depend on which member came first. (2) When the group spans more than one
// process, the process's combined contribution goes to the CollectiveTransport (MPI's own
// nonblocking collectives, comm/mpi_collectives.h), once per process and instance; its result goes
// to every local member. Within one process there is no second stage, so collectives also work in a
// plain process without cluster::init (an eager call is step 0).
//
// Every process a group spans must be a task of the transport's communicator; for now a
// cross-process group must span every task of the cluster (InvalidArgument naming the missing
// ones), so that one communicator, a dup of the world made by cluster::init, serves every group.
// Why one communicator and how its collectives are ordered: comm/collective_order.h.
//
// Cancellation: a member's step that is cancelled (another task failed, a peer was lost, a
// deadline) completes its pending collective at once with the step's error. A collective already
// handed to MPI cannot be cancelled (MPI forbids cancelling collectives): it is abandoned, its
// buffers kept alive since MPI may still write them, and the transport is "interrupted" (later
// cross-process instances fail fast with FailedPrecondition naming the group) until reset(), which
// every process calls together (the chief asks every task: ClusterRuntime::reset_collectives).
//
// GPU tensors of a group whose nodes carry an nccl_id (one GPU member per process) do not come
// here: the CUDA kernels hand them to NCCL (comm/nccl/nccl_collectives.h). A group without one is
// never placed on a GPU (kernels/collective_attrs.h), so its GPU tensors reach it by Send/Recv.
//
// Steps of a group run one after another (data-parallel steps are sequential): a process never
// runs instances of two steps of one cross-process group at once. Within one process nothing is
// ordered: members simply meet. Called eagerly (no executor), a kernel waits for its members, so
// several local members need several threads; a one-member group completes at once.
//
// Checked: members of one process must agree on dtypes, shapes and input counts, an all-gather's
// trailing dims and dtype across processes too (its header), each InvalidArgument naming the op.
// Not checked across processes: an all-reduce's or broadcast's element count (the graph's static
// shapes make them agree; a disagreement is left to MPI, which may fail or truncate).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/collective_order.h"
#include "runtime/collectives.h"
#include "runtime/tensor.h"

namespace weft {

class CancellationManager;

struct CrossProcessCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CollectiveInstanceKey key;
  std::string op;
  Tensor send;    // all-reduce: the local sum; broadcast: the root's value on the root's process;
                  // all-gather: this process's members' rows, concatenated in member order
  Tensor result;  // all-reduce: where the sum goes (send itself: in place); broadcast: the buffer
                  // received into (send itself on the root's process); all-gather: set by the transport
  int root_rank = 0;                 // broadcast
  std::vector<int> member_ranks;     // all-gather: the rank of each member, in member order
  std::vector<int64_t> member_rows;  // all-gather: dim 0 of each local member's input, -1 elsewhere
  std::function<void(std::exception_ptr)> done;  // exactly once, on any thread
};

// The cross-process stage (comm/mpi_collectives.h).
class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;
  // Full task names in rank order.
  virtual const std::vector<std::string>& tasks() const = 0;
  // Issues `c` in its turn (collective_order.h) and calls c->done when it has completed, or at
  // once with an error (interrupted, out of order).
  virtual void start(std::shared_ptr<CrossProcessCollective> c) = 0;
  // The step waiting for `c` was cancelled: `c` no longer calls done; if it was handed to MPI (or
  // a peer may have issued it), its buffers are kept and the transport is interrupted.
  virtual void abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error) = 0;
  // Collective over every task: see CollectiveExecutor::reset.
  virtual void reset(std::chrono::milliseconds timeout) = 0;
};

class CollectiveExecutor {
 public:
  using Done = Collectives::Done;

  // Without a transport, groups must lie within this process.
  explicit CollectiveExecutor(std::unique_ptr<CollectiveTransport> transport = nullptr);
  ~CollectiveExecutor();
  CollectiveExecutor(const CollectiveExecutor&) = delete;
  CollectiveExecutor& operator=(const CollectiveExecutor&) = delete;

  // Contributes `inputs` of member p.member to instance (p.group_key, step_id, p.instance_key).
  // `done` is called exactly once, on any thread (possibly this one, before run_async returns):
  // with the member's outputs, or with the error (InvalidArgument naming p.op when members
  // disagree; the step's error when `cancellation`, which may be null, is cancelled first).
  void run_async(const CollectiveParams& p, int64_t step_id, std::vector<Tensor> inputs,
                 CancellationManager* cancellation, Done done);

  // Collective over ALL processes of the transport (each must call it): fails everything pending
  // with Aborted-like FailedPrecondition, then replaces the communicator with a fresh one; bounded
  // by `timeout` (Unavailable when some process does not take part in time). Clears "interrupted".
  // Without a transport it only forgets the pending local instances.
  void reset(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  bool has_transport() const { return transport_ != nullptr; }

 private:
  struct Instance;
  struct Impl;
  std::unique_ptr<CollectiveTransport> transport_;
  std::unique_ptr<Impl> impl_;
};

// The process's collective executor: local only until cluster::init installs the MPI one.
CollectiveExecutor& process_collectives();
// Installs `executor` as the process's (cluster::init, before any step runs). The one it replaces
// is kept alive (a kernel may still hold it).
void set_process_collectives(std::unique_ptr<CollectiveExecutor> executor);
// Destroys the process's executor (its transport's requests are given up): before MPI_Finalize,
// when no step runs any more. A later process_collectives() makes a local one.
void shut_down_process_collectives();

}  // namespace weft
