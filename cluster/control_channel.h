// The cluster's control transport: Cap'n Proto messages (cluster/proto/control.capnp) sent as
// MPI messages on a communicator of their own, a client of the process's MPI progress engine
// (comm/mpi_progress_engine.h). Why MPI and not Cap'n Proto RPC over TCP: the processes are
// already connected by mpirun (no addresses to exchange, no ports to open), a message costs a few
// microseconds instead of a TCP round trip through kj's event loop, and the same transport works
// under srun. What TCP would give for free, seeing a lost peer, comes from the liveness pings of
// cluster/cluster_runtime.h instead.
//
//   ControlChannel ch(control_comm);
//   ch.listen(kReplyTag, MPI_ANY_SOURCE, [](ControlChannel::Message m) { ... decode(m.words()) ... });
//   ch.send(1, kRequestTag, message);                  // never waits for the peer
//
// Nothing here waits on a peer: a send is on the wire at once and the engine keeps its bytes until
// MPI is done with them; messages are taken whole by the engine, whatever their length, in the
// order each sender sent them, and a longer one than kMaxMessageBytes is refused without being
// allocated. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <mpi.h>

#include "comm/mpi_progress_engine.h"

namespace weft {

inline constexpr int kRequestTag = 1;  // chief -> task
inline constexpr int kReplyTag = 2;    // task -> chief

class ControlChannel {
 public:
  // The largest message accepted; a bigger one is refused (and dropped) as damaged.
  static constexpr size_t kMaxMessageBytes = size_t{1} << 30;

  explicit ControlChannel(MPI_Comm comm, MpiProgressEngine& engine = MpiProgressEngine::process());
  // Cancels what is still pending (call before MPI_Finalize, or let MPI_Finalize end the engine).
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  struct Message {
    int source = -1;
    // Empty, or why the message is damaged (not whole Cap'n Proto words, too long): it names the
    // sender, and words() is empty.
    std::string error;
    std::span<const capnp::word> words() const {
      return {reinterpret_cast<const capnp::word*>(storage.data()), error.empty() ? storage.size() : 0};
    }
    std::vector<uint64_t> storage;
  };

  void send(int rank, int tag, capnp::MessageBuilder& message);
  // Hands every message with `tag` (from `source`, or anyone) to `on_message`, on the engine's
  // driving thread: it must be brief (queue the work, answer a ping).
  void listen(int tag, int source, std::function<void(Message)> on_message);
  // No more messages with `tag` reach the listener, from the moment this returns (one running
  // finishes first); those that come are dropped. Not from the listener itself.
  void stop_listening(int tag);
  // Waits, at most `timeout`, for MPI to finish the sends made so far (before MPI_Finalize).
  void flush(std::chrono::milliseconds timeout);
  MpiProgressEngine& engine() { return engine_; }

 private:
  MPI_Comm comm_;
  MpiProgressEngine& engine_;
  MpiProgressEngine::ClientId client_;
  std::shared_mutex listeners_mu_;  // held shared while a listener runs
  std::map<int, std::function<void(Message)>> listeners_;  // by tag
};

}  // namespace weft
