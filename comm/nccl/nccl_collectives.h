// Collectives on GPU tensors through NCCL, for the CUDA kernels of the collective ops
// (kernels/cuda/collective.cpp). A member's index in its group is its NCCL rank, and the member
// count is nranks. A process may hold one member (the mpirun model: one GPU per task) or several
// (a task with several GPUs, as TensorFlow's MirroredStrategy runs one process over a machine's
// GPUs): it then has one NCCL communicator per member.
//
//   NcclCall c{.p = params, .step_id = step, .cancellation = cm, .device = cu.device,
//              .compute = cu.stream, .inputs = {x}, .outputs = {y}};   // y allocated on the GPU
//   process_nccl_collectives().run_async(std::move(c), [](std::exception_ptr e) { ... });
//
// Gathering: NCCL needs the calls of one collective on a process's several ranks in ONE
// ncclGroupStart/End, while the executor runs each member's node on its own. So each call first
// joins its instance (nccl_gathered_launch.h); when the process's last member of the group has
// come, the instance is issued as a whole, one group over every local rank. Members that never
// come (their replica failed or is stuck) fail the instance after `init_timeout`, naming them; a
// cancelled step fails it at once. With one member per process an instance is issued as it comes.
//
// Communicators: one per (group key, nccl_id) and local member, made when the group's first
// instance has gathered, all in one group by ncclCommInitRankConfig in NON-blocking mode; the
// watchdog polls ncclCommGetAsyncError until every one is ready, at most `init_timeout` (default
// 60 s) and only while no waiting step is cancelled, so a peer that never comes is Unavailable
// naming the group and the ranks, never a hang.
//
// Issuing: a group's instances are issued in comm/collective_order.h's order (by step, then
// instance key); one that gathers early waits in the communicators' NcclIssueQueue, holding no
// thread. Each member's calls run on its GPU's NCCL stream (one per device), which first waits (an
// event recorded when the kernel ran) for the compute stream that made the inputs; the compute
// stream then waits (an event) for the NCCL stream, so later kernels and the allocator's reuse of
// memory are ordered after the collective. Several inputs of an all-reduce, and every local
// member, go in one ncclGroupStart/End.
//
// Watchdog (nccl_watchdog.h, the same one as the NCCL rendezvous's): one thread polls every
// collective not yet complete: its completion event, the communicator's ncclCommGetAsyncError and
// the step's cancellation. Complete: done(null). A NCCL error: Unavailable naming the group; a
// cancelled step: the step's error. Either way the communicator is aborted (ncclCommAbort) and
// dropped: every other collective of it fails, and a later use of the same (group, id) is
// FailedPrecondition naming the group (a new id is needed: DataParallel rebuilds its step under
// fresh ids after a failed one). The first collective of a group under a new id aborts the
// group's communicators under older ids, which a failure left alive on tasks where nothing was
// pending. The tensors of an aborted collective are kept until its event completes (the NCCL
// kernels may still touch them).
//
// Not checked across processes: an all-gather's inputs must have the same shape on every member
// (ncclAllGather has one count), as the graph's static shapes make them; a mean of integers is
// NCCL's ncclAvg (a sum divided by nranks, truncated), a mean of floats may differ from the CPU's
// sum/n in the last bit.
//
// Tests: tests/gpu/nccl_test.cpp covers one-member groups per collective and dtype, a cancelled
// step, a group of two processes (exact sums, means, broadcasts, all-gathers; a peer that dies)
// one GPU each or sharing a GPU as NCCL hosts of their own, and several members in one process;
// the data-parallel tests run DataParallel over 2 and 4 tasks under mpirun, its recovery after a
// failed step included. On the CPU, tests/comm/nccl_watchdog_test.cpp covers every path of the
// watchdog's state machine and tests/comm/nccl_gathered_launch_test.cpp the gathering of several
// members. What of this has run on a GPU: docs/hardware.md.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_executor.h"

namespace weft {

class CancellationManager;

struct NcclCall {
  CollectiveParams p;                          // with p.nccl_id set
  int64_t step_id = 0;
  CancellationManager* cancellation = nullptr;  // may be null; must outlive the call's done
  int device = 0;                               // CUDA ordinal of this member's GPU (its device index)
  cudaStream_t compute = nullptr;               // the device's compute stream
  std::vector<Tensor> inputs;                   // on the GPU (none for a broadcast's non-root)
  std::vector<Tensor> outputs;                  // on the GPU, allocated by the caller
};

class NcclCollectives {
 public:
  using Done = std::function<void(std::exception_ptr error)>;

  explicit NcclCollectives(std::chrono::milliseconds init_timeout = std::chrono::seconds(60));
  // Aborts the communicators still open and stops the watchdog; pending collectives fail.
  ~NcclCollectives();
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  // `done` exactly once, on this thread (an error found at once) or the watchdog's.
  void run_async(NcclCall call, Done done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process's, created on first use.
NcclCollectives& process_nccl_collectives();

}  // namespace weft
