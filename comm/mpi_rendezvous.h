// The rendezvous of a task of a cluster: Send and Recv between devices of different processes
// meet over MPI (host memory); between devices of this process they meet in a LocalRendezvous,
// as in one process. Keys name devices by full name ("/job:worker/replica:0/task:2/device:CPU:0");
// `rank_of` maps a key's device to the MPI rank of its task.
//
//   MpiRendezvous rdv(data_comm, [&](std::string_view device) { return spec.rank_of(device); });
//   rdv.send(key, t);                               // never blocks; the tensor is held until sent
//   rdv.recv_async(key, [](std::exception_ptr e, Tensor t, bool dead) { ... });
//
// Matching is by key, whatever order sends and recvs come in on either side: a send to another
// rank first sends a small header (the key, dtype, shape and the tag its payload will use), then
// the payload straight from the tensor's buffer (no copy); the receiver's progress engine reads
// headers from any rank, checks each against its waiting recv's dtype and shape where the recv
// said them (recv_async_expecting), and receives the payload into a new tensor of the announced
// dtype and shape once a probe has shown it has the announced length. Payloads above MPI's count limit (2^31 - 1 elements of a datatype) travel in several
// messages. The rendezvous is a client of the process's MPI progress engine
// (comm/mpi_progress_engine.h): a send's MPI_Isend calls are made by the thread that sends
// (outside the rendezvous's lock), so the tensor is on the wire at once, even when the engine's
// thread shares a core with a busy kernel thread; headers and payloads are received, and every
// request completed, by the engine's driving thread, which never waits in MPI.
//
// With a device transport (comm/device_payloads.h; NCCL in a CUDA build), a GPU tensor bound for
// a GPU of another task sends only its header over MPI, with the transport's ticket; its bytes go
// GPU to GPU and the receiver's transport hands the tensor, on its GPU, to the recv. A failure of
// the transport fails the whole rendezvous, as a damaged header does.
//
// A dead peer is not detected here (MPI cannot tell): the cluster's liveness check calls
// start_abort or abort_step, which fails every pending recv of the rendezvous or step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include <mpi.h>

#include "comm/device_payloads.h"
#include "comm/mpi_progress_engine.h"
#include "runtime/rendezvous.h"

namespace weft {

// The tag of header messages on the communicator; payloads use tags 1 to MPI_TAG_UB.
inline constexpr int kMpiRendezvousHeaderTag = 0;

struct MpiRendezvousOptions {
  // Largest payload message, in bytes; bigger tensors are split. Tests lower it to exercise the
  // split with small tensors.
  size_t max_message_bytes = size_t{1} << 30;
  // The largest header accepted from a peer; a bigger one is a damaged message (an error).
  size_t max_header_bytes = size_t{1} << 16;
  // The largest tensor accepted from a peer: a header announcing more is damaged, refused before
  // anything is allocated for it. 0: this machine's physical memory.
  uint64_t max_payload_bytes = 0;
  // Moves the bytes of GPU tensors between GPUs of different tasks; null: the rendezvous sends
  // host tensors only (a GPU's Send kernel then stages its tensor in host memory). Owned by the
  // rendezvous, which destroys it (and with it the transport's thread) before its own state.
  std::unique_ptr<DevicePayloads> device_payloads;
  // Drives its MPI requests; null: the process's engine.
  MpiProgressEngine* engine = nullptr;
};

class MpiRendezvous final : public Rendezvous {
 public:
  // `comm` is the communicator for tensors only (the caller dups it from its world, apart from
  // control traffic); it must outlive this object. `rank_of(device)` is the rank of the task
  // owning a full device name, or -1 when no task owns it (InvalidArgument on send and recv); it
  // is also called on the engine's driving thread (to check arriving keys), so it must be thread-safe.
  // The communicator's error handler is set to MPI_ERRORS_RETURN, so that a damaged message from
  // a peer becomes an error here rather than the end of the process.
  MpiRendezvous(MPI_Comm comm, std::function<int(std::string_view device)> rank_of,
                MpiRendezvousOptions options = {});
  // Pending recvs fail with FailedPrecondition; pending sends to peers are cancelled (after half a
  // second to be delivered). Call before MPI_Finalize.
  ~MpiRendezvous() override;

  void send(const RendezvousKey& key, Tensor value, bool is_dead = false) override;
  void recv_async(const RendezvousKey& key, DoneCallback done) override;
  // A header from a peer that `expected` cannot admit fails the key's step before the payload's
  // receive is posted or its buffer allocated (with a device transport, the transport still
  // receives it, into a tensor dropped, to keep its link in step).
  void recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected, DoneCallback done) override;
  void start_abort(std::exception_ptr error) override;
  void abort_step(int64_t step_id, std::exception_ptr error) override;
  void cleanup_step(int64_t step_id) override;
  bool takes_device_tensor(const RendezvousKey& key, const Tensor& value) const override;
  // From a peer: the engine polls at short intervals for a while (MPI cannot say when the header
  // comes).
  void expect_transfer(const RendezvousKey& key, uint64_t bytes) override;

  // A tensor that `peer` sent under `key` by another way than this rendezvous (in a step's control
  // message, scheduler/step_rendezvous.h), handed to its recv as if MPI had brought it: dropped when
  // its step was aborted or has ended. InvalidArgument unless the key's source device is on `peer`
  // and its destination on this rank (the message is untrusted).
  void deliver_from_peer(int peer, const RendezvousKey& key, Tensor value, bool is_dead);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft
