// The one thing in a process that drives MPI: every nonblocking request weft makes, on every
// communicator (control messages, tensors, collectives), is handed to this engine, which tests
// them, runs their completions, keeps what MPI may still touch after a cancel, and can say at any
// moment what is pending and for how long. The control channel, the MPI rendezvous and the MPI
// collectives are its clients: they start a request on their own thread (so a message is on the
// wire at once, without waiting for another thread to be scheduled) and hand it over with a
// completion callback; from then on only the engine tests, cancels or frees it.
//
//   MpiProgressEngine& engine = MpiProgressEngine::process();
//   auto client = engine.add_client("rendezvous");
//   engine.isend(client, buf, n, peer, tag, comm, {.kind = "payload send", .peer = peer, .bytes = n},
//                [](const MPI_Status&, int error) { ... }, keep_alive);
//   engine.send_message(client, comm, peer, kTag, bytes, n, keep_alive);    // messages of any length
//   engine.listen(client, comm, kTag, MPI_ANY_SOURCE, max_bytes, [](MpiMessage m) { ... });
//   engine.irecv_probed(client, buf, n, peer, tag, comm, {.kind = "payload recv"}, done, keep);  // exactly n
//   engine.probe_listen(client, comm, kTag, MPI_ANY_SOURCE, max_bytes, op, [](MpiMessage m) { ... });
//
// Who drives: the engine's thread, and, in its place, a thread that waits for a completion and
// calls drive_until (the chief waiting for a step's answers, a task waiting for its next
// request). One driver at a time; a waiter that drives spares the hand-off from the engine's thread
// to itself, a wake-up on the critical path of every step (tens of microseconds when the machine
// has fewer cores than threads, against a null step of about 25). Completions run on the driving
// thread, one round at a time and in order; they must be short (queue work, notify) and must not
// call cancel_client or shut_down.
//
// Pacing (one policy for every client): after traffic the driver yields between polls for a while
// (a yield gives the core only to threads that are ready; polling without a pause took the core
// from the peer on machines with fewer cores than threads), then naps: 20 us while requests are in
// flight or traffic was recent (a large message's handshake needs progress on this side too), then
// 100 us, then 1 ms once idle. Naps of tens of microseconds need a small timer slack (Linux adds
// 50 us to every timed wait by default). New work wakes a napping driver at once.
//
// Every request but a standing receive is also an entry in the process's flight recorder
// (runtime/flight_recorder.h), from track() to its completion ("done" or "error") or its cancel
// ("cancelled"); a standing receive is recorded, whole, when a message comes. Fixed-size fields
// only (the kind is a literal, the start is the track's clock read): no text on the hot path.
//
// There is one engine per process (process()); MPI_Finalize shuts it down first (an attribute on
// MPI_COMM_SELF), so its thread never calls MPI after the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

namespace weft {

// MPI's text for an error code.
std::string mpi_error_string(int code);

// What a request is for, as the engine reports it (stall reports read it).
struct MpiOperation {
  const char* kind = "";  // a literal: "header send", "payload recv", "all-reduce", "message recv", ...
  int peer = -1;          // rank on the request's communicator; -1: any, or a collective
  int tag = -1;
  uint64_t bytes = 0;
  std::string what;       // the key, the instance, the message kind
  // Says `what` from the request's keep-alive when a report asks for it, so that the hot path
  // builds no text (a rendezvous key, formatted per tensor, cost a microsecond of latency); null:
  // `what` is given.
  std::string (*describe)(const void* keep) = nullptr;
  // A receive that is always posted for whatever comes (a header receive): not traffic in flight.
  bool standing = false;
  // A send (isend sets it): given a moment to be delivered before it is cancelled.
  bool is_send = false;
  // MPI cannot cancel collectives' requests: at a cancel they are kept, with their buffers, until exit.
  bool cancellable = true;
};

// A pending request: its client, what it is for (`op.what` filled in), and how long it has been
// pending.
struct MpiPending {
  std::string client;
  MpiOperation op;
  std::chrono::steady_clock::duration age{};
};

// A whole message taken by a listener: its sender and its bytes (8-byte aligned words, so a
// Cap'n Proto message can be read in place). `error` is empty, or says why the message was
// refused (too long, not received): its bytes are then empty.
struct MpiMessage {
  int source = -1;
  int tag = -1;
  size_t bytes = 0;
  std::vector<uint64_t> words;
  std::string error;
};

class MpiProgressEngine {
 public:
  using ClientId = int;
  // Runs when a request completes (error: MPI_SUCCESS, or MPI's code for it).
  using Done = std::function<void(const MPI_Status& status, int error)>;
  using OnMessage = std::function<void(MpiMessage message)>;

  // The process's engine, made on first use (MPI must be initialised with MPI_THREAD_MULTIPLE).
  static MpiProgressEngine& process();

  MpiProgressEngine();
  ~MpiProgressEngine();  // shut_down()
  MpiProgressEngine(const MpiProgressEngine&) = delete;
  MpiProgressEngine& operator=(const MpiProgressEngine&) = delete;

  // A client, named in reports. `yield_after_traffic`: how long the driver yields between polls
  // after this client's traffic before it naps (the collectives ask for longer: each of an
  // all-reduce's rounds waits for a poll).
  ClientId add_client(std::string name,
                      std::chrono::microseconds yield_after_traffic = std::chrono::microseconds(200));

  // Hands a started request to the engine. `done` runs once, on the driving thread, when it
  // completes; `keep` lives until then (or, for a request never completed, until the process
  // ends: MPI may still read or write its buffers).
  void track(ClientId client, MPI_Request request, MpiOperation op, Done done, std::shared_ptr<const void> keep = {});
  // MPI_Isend / MPI_Irecv of bytes on the calling thread, then track. Returns MPI's error code;
  // on an error nothing is tracked and `done` is not called.
  int isend(ClientId client, const void* buffer, int bytes, int peer, int tag, MPI_Comm comm, MpiOperation op,
            Done done, std::shared_ptr<const void> keep = {});
  int irecv(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm, MpiOperation op, Done done,
            std::shared_ptr<const void> keep = {});
  // A receive of a message whose length the caller knows (a payload its checked header
  // announced), made safe against a longer one: the message is probed (MPI_Improbe, each round
  // until it comes) and received into `buffer` only when it has exactly `bytes`. One of another
  // length is taken into nothing, and `done` gets MPI_ERR_TRUNCATE with the probe's status
  // (MPI_Get_count on it says the length that came). A null `buffer`: the message is taken into
  // nothing whatever its length (a refused transfer's; `done` as above). A receive posted before
  // its message came would be overrun by a longer one on Open MPI 4.1's single-copy path
  // (comm/mpi_message_frame.h). Costs an MPI_Improbe per round while it waits.
  void irecv_probed(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm, MpiOperation op,
                    Done done, std::shared_ptr<const void> keep = {});
  // Sends `bytes` at `data` to `peer`'s listener on `tag`, as one message of any length (framed:
  // comm/mpi_message_frame.h); `keep` holds the bytes until MPI is done with them. Returns MPI's
  // error code; on an error nothing was sent.
  int send_message(ClientId client, MPI_Comm comm, int peer, int tag, const void* data, size_t bytes,
                   std::shared_ptr<const void> keep, std::string what = {});
  // Takes every message send_message sends with `tag` on `comm` (from `source`, or anyone) and
  // hands each whole to `on_message`, in the order they came. A message longer than `max_bytes`
  // is refused before anything is allocated for it: on_message gets its error. A frame longer
  // than a frame may be, or a continuation longer than its frame announced, is refused naming the
  // sender, never written past a buffer (comm/mpi_message_frame.h says how).
  void listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes, OnMessage on_message);

  // Takes every message of `tag` on `comm` (from `source`, or anyone), sent by plain sends of
  // any length, and hands each whole to `on_message`: each is probed first (MPI_Improbe), its
  // length checked against `max_bytes` before a buffer is allocated or a byte received, then
  // received into a buffer of exactly that length. A longer one is taken into nothing and
  // on_message gets its error. For receives whose length is not known for sure: a standing
  // receive of a fixed size would be overrun by a longer message on Open MPI 4.1's single-copy
  // path (comm/mpi_message_frame.h). Costs an MPI_Improbe per round.
  void probe_listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes, MpiOperation op,
                    OnMessage on_message);

  // Cancels every request of `client` and drops its listeners: receives at once, sends after up
  // to `send_grace` (most are delivered by then); what MPI cannot cancel is kept, with its
  // buffers, until exit. Their callbacks are not called. Not from a completion.
  void cancel_client(ClientId client, std::chrono::milliseconds send_grace);
  // Waits up to `timeout` for the client's sends to complete; whether they did.
  bool flush_sends(ClientId client, std::chrono::milliseconds timeout);
  // Keeps something MPI may still use (a communicator whose requests were abandoned) until exit.
  void keep_until_exit(std::shared_ptr<const void> thing);
  void keep_until_exit(MPI_Request request);

  // Traffic is coming that MPI cannot announce (a peer said it will send): naps are short now.
  void expect_traffic();

  // Ends every driver's nap now: something a drive_until's `done` reads has changed outside the
  // engine (a step's nodes became ready on another thread).
  void wake();

  // The calling thread drives until `done()` holds or `deadline` passes (whether done held),
  // paced as the engine's thread would be; another driver meanwhile makes it nap instead. `done`
  // is read between rounds, without the engine's locks.
  bool drive_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline);

  // Everything pending now, oldest first.
  std::vector<MpiPending> pending() const;

  // Stops the thread and cancels every client's requests (before MPI_Finalize; idempotent).
  void shut_down();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft
