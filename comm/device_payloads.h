// The bytes of device tensors (GPU memory) between tasks, moved by another way than MPI while the
// MPI rendezvous (comm/mpi_rendezvous.h) still carries their headers and does the matching: with
// CUDA, NCCL's point-to-point calls (comm/nccl/nccl_p2p.h), GPU to GPU, with no staging in host
// memory.
//
//   MpiRendezvous rdv(comm, rank_of, {.device_payloads = make_nccl_payloads()});
//   // sender:   if (payloads.carries(key, t)) header.device = payloads.send(peer, key, t);
//   // receiver: payloads.recv(peer, key, dtype, shape, *header.device, [](Tensor t) { ... });
//
// Why the split: NCCL matches a send with a receive by the ORDER in which each side issues them on
// a communicator, not by a tag, and an executor sends in whatever order its timing gives. So the
// transport numbers the transfers of each link (one sender device to one receiver device) as the
// sender makes them, and the number travels in the MPI header as a ticket; the receiver issues
// its receives in ticket order, whatever order the headers arrive in. A link is named by a string
// the transport chooses (NCCL: its communicator's unique id), so the first header of a link is
// also how the receiver learns of it: no set-up exchange of its own.
//
// The contract that keeps the links in step: the sender issues every transfer it gave a ticket
// for; the receiver issues a receive for every header it gets, even of a step that was aborted
// meanwhile (the rendezvous then drops the tensor). A step's abort therefore never touches a link.
// Anything that breaks a link (a NCCL error, a peer that never joins, no memory for a receive) is
// reported through the failure handler, and the rendezvous fails as a whole (start_abort), as for
// a damaged header: which recv would a lost transfer have gone to? abort() then aborts every link,
// which makes their pending GPU work return.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "runtime/dtype.h"
#include "runtime/rendezvous.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace weft {

// Which link a transfer takes and its place in the link's order.
struct DevicePayloadTicket {
  std::string link;       // 1 to kMaxDeviceLinkBytes bytes, chosen by the transport
  uint64_t sequence = 0;  // 0, 1, 2, ... per link, in the order the sender made the transfers
  bool operator==(const DevicePayloadTicket&) const = default;
};

inline constexpr size_t kMaxDeviceLinkBytes = 512;

class DevicePayloads {
 public:
  using Arrived = std::function<void(Tensor value)>;
  using Failure = std::function<void(std::exception_ptr error)>;

  virtual ~DevicePayloads() = default;

  // Set once, before any transfer: how a transfer that fails after send() or recv() returned is
  // reported (the rendezvous aborts). Called on the transport's own thread.
  virtual void set_failure_handler(Failure on_failure) = 0;

  // Whether `value`, sent under `key` to another task, moves by this transport: a tensor on one of
  // this process's GPUs, with bytes, going to a GPU.
  virtual bool carries(const RendezvousKey& key, const Tensor& value) const = 0;
  // Starts moving `value` (carries() held) to task `peer`; the buffer is held until the bytes have
  // left. Never blocks on the peer. Throws when the transfer cannot be queued (nothing was).
  virtual DevicePayloadTicket send(int peer, const RendezvousKey& key, Tensor value) = 0;
  // Receives the transfer `ticket` from task `peer` into a new tensor of `dtype` and `shape` on the
  // key's destination device; `arrived` runs once it is there (on the transport's thread). Throws
  // InvalidArgument for a ticket or key that cannot be right (the peer is broken); failures after
  // it returned go to the failure handler, and `arrived` is then never called.
  virtual void recv(int peer, const RendezvousKey& key, DType dtype, const Shape& shape,
                    const DevicePayloadTicket& ticket, Arrived arrived) = 0;
  // Aborts every link (the first error wins); later send() and recv() throw it.
  virtual void abort(std::exception_ptr error) = 0;
};

}  // namespace weft
