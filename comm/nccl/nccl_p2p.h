// The NCCL rendezvous: the bytes of GPU tensors between tasks go GPU to GPU through NCCL's
// point-to-point calls, while the MPI rendezvous carries their headers (comm/device_payloads.h
// says why the split and what keeps the two sides in step).
//
//   MpiRendezvousOptions o;
//   o.device_payloads = make_nccl_payloads();      // null without NCCL or without a GPU
//   MpiRendezvous rdv(data_comm, rank_of, std::move(o));
//
// Links: one NCCL communicator of two ranks per (sender GPU, receiver task, receiver GPU), the
// sender its rank 0. The sender makes the link on its first transfer: ncclGetUniqueId, and the id
// (hex) is the link's name in every ticket, so the receiver joins when the first header comes;
// both sides create the communicator in NCCL's non-blocking mode, and a watchdog thread
// (nccl_watchdog.h, the same one as the collectives') polls it ready within `init_timeout`, else
// the link fails (a peer that never joins is an error, not a hang). One direction per communicator, so each side issues only sends or only receives on it, in
// ticket order (BasicIssueQueue<SequenceOrder>), and a link's transfers never wait for another's:
// each link has its own stream (two tasks sending to each other on one stream would deadlock, each
// send waiting for a receive queued behind the other's send).
//
// Ordering with the GPU's work: the transfer's stream waits (an event) for the compute stream on
// which the tensor was made, or, for a receive, allocated; the watchdog sees the transfer's
// completion event and then drops the sent buffer or hands the received tensor on, so the compute
// stream never waits for NCCL and a free of either buffer is ordered after the transfer.
//
// Failure: a NCCL error, a link that does not come up in time, or a CUDA error is reported to the
// failure handler (the rendezvous aborts); abort() aborts every link with ncclCommAbort, which
// makes their kernels return, so a transfer to a task that died never holds the GPU. Buffers of
// transfers in flight at an abort are kept until their events complete.
//
// Set WEFT_NCCL_RENDEZVOUS=0 to send GPU tensors through host memory instead (as without NCCL).
//
// Tests: tests/gpu/nccl_p2p_test.cpp moves tensors between two processes (one GPU each, or one
// GPU shared as two NCCL hosts: tests/gpu/child_processes.h), and a graph over three tasks' GPUs
// under mpirun (tests/cluster_mpi) sends through it both ways.
// tests/comm_mpi/device_payloads_test.cpp runs the rendezvous's side of the contract with an
// order-matched stand-in on the CPU, and tests/comm/nccl_watchdog_test.cpp the watchdog's. What of
// this has run on a GPU: docs/hardware.md.
#pragma once

#include <chrono>
#include <memory>

#include "comm/device_payloads.h"

namespace weft {

// This process's NCCL transport, or null when weft was built without NCCL, the process has no GPU,
// or WEFT_NCCL_RENDEZVOUS is "0".
std::unique_ptr<DevicePayloads> make_nccl_payloads(
    std::chrono::milliseconds init_timeout = std::chrono::seconds(60));

}  // namespace weft
