// The cross-process stage of collectives (comm/collective_executor.h) on MPI's own nonblocking
// collectives: MPI_Iallreduce, MPI_Ibcast and MPI_Iallgatherv (after an MPI_Iallgather of a small
// header of counts), never a hand-rolled ring.
//
//   MPI_Comm parent;  MPI_Comm_dup(MPI_COMM_WORLD, &parent);       // cluster::init, on every task
//   set_process_collectives(std::make_unique<CollectiveExecutor>(
//       std::make_unique<MpiCollectives>(parent, task_names)));
//
// One communicator, made from `parent` and kept apart from control and rendezvous traffic, serves
// every group. MPI needs every process to start its collectives on a communicator in the same
// order; the executor's timing does not give one, so they are issued in the order of
// comm/collective_order.h (step, then instance key), whatever order they become ready in: by the
// thread that starts the next one in order, or by the process's MPI progress engine
// (comm/mpi_progress_engine.h) when a completion lets the next one go. One
// communicator rather than one per group, because making a communicator is itself a collective
// whose order across processes would need the same agreement; the price is one cross-process group
// per step (an error otherwise), which data parallelism (one group, buckets as instances) meets.
//
// Every request is handed to the engine, which tests it and calls back; this class has no thread
// of its own.
//
// A collective handed to MPI cannot be cancelled (MPI forbids MPI_Cancel and MPI_Request_free on
// collective requests). When its step is cancelled it is abandoned: its buffers are kept alive (MPI
// may still write them) and the transport is interrupted, since the processes no longer agree on
// what was issued: later instances fail fast with FailedPrecondition naming the group, until
// reset(), a collective over every process that drops everything and makes a fresh communicator
// with MPI_Comm_idup of `parent`, polled against a deadline (MPI_Comm_dup could wait forever for a
// dead peer). Only reset uses `parent`, and every process calls it, so its collectives agree.
//
// Counts above max_count elements (2^31 - 1 by default, MPI's int) are split into several calls.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "comm/collective_executor.h"
#include "comm/mpi_progress_engine.h"

namespace weft {

struct MpiCollectivesOptions {
  // Largest element count of one MPI call; tests lower it to exercise the splitting.
  int64_t max_count = INT_MAX;
  // Drives its MPI requests; null: the process's engine.
  MpiProgressEngine* engine = nullptr;
};

class MpiCollectives final : public CollectiveTransport {
 public:
  // `parent`'s ranks are `tasks` (full task names in rank order); it must outlive this object and
  // serve nothing else. Collective over `parent` (dups it): every process constructs it together.
  MpiCollectives(MPI_Comm parent, std::vector<std::string> tasks, MpiCollectivesOptions options = {});
  // Pending collectives fail; what MPI has not completed is kept until exit (call before MPI_Finalize).
  ~MpiCollectives() override;

  const std::vector<std::string>& tasks() const override { return tasks_; }
  void start(std::shared_ptr<CrossProcessCollective> c) override;
  void abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error) override;
  void reset(std::chrono::milliseconds timeout) override;

 private:
  class Impl;
  std::vector<std::string> tasks_;
  std::unique_ptr<Impl> impl_;
};

// [offset, count) pieces of `total` elements, each at most `max_count`: the MPI calls of one buffer.
std::vector<std::pair<int64_t, int64_t>> split_counts(int64_t total, int64_t max_count);

}  // namespace weft
