// The cluster's control transport: Cap'n Proto messages (cluster/proto/control.capnp) sent as
// MPI messages on a communicator of their own. Why MPI and not Cap'n Proto RPC over TCP: the
// processes are already connected by mpirun (no addresses to exchange, no ports to open), a
// message costs a few microseconds instead of a TCP round trip through kj's event loop, and the
// same transport works under srun. What TCP would give for free, seeing a lost peer, comes from
// the liveness pings of cluster/cluster_runtime.h instead.
//
//   ControlChannel ch(control_comm);
//   ch.send(1, kRequestTag, encode(request));           // never waits for the peer
//   if (auto m = ch.try_receive(kReplyTag)) decode(m->words) ...
//
// Nothing here waits on a peer: sends are nonblocking (kept until MPI completes them, cancelled
// at the end), receives probe without blocking. Thread-safe (MPI_THREAD_MULTIPLE).
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <vector>

#include <capnp/message.h>
#include <mpi.h>

namespace weft {

inline constexpr int kRequestTag = 1;  // chief -> task
inline constexpr int kReplyTag = 2;    // task -> chief

class ControlChannel {
 public:
  // The largest message accepted; a bigger one is refused (and dropped) as damaged.
  static constexpr size_t kMaxMessageBytes = size_t{1} << 30;

  explicit ControlChannel(MPI_Comm comm) : comm_(comm) {}
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  struct Message {
    int source = -1;
    std::vector<capnp::word> words;
  };

  void send(int rank, int tag, capnp::MessageBuilder& message);
  // A message with `tag` (from `source`, or anyone) if one has arrived. InvalidArgument naming
  // the sender for one that is not whole words or is too big (it is dropped).
  std::optional<Message> try_receive(int tag, int source = MPI_ANY_SOURCE);
  // Waits, at most `timeout`, for MPI to finish the sends made so far (before MPI_Finalize).
  void flush(std::chrono::milliseconds timeout);

 private:
  struct Pending {
    MPI_Request request;
    kj::Array<capnp::word> words;
  };
  void reap_locked();

  MPI_Comm comm_;
  std::mutex mu_;
  std::list<Pending> pending_;  // sends MPI has not completed yet
};

}  // namespace weft
