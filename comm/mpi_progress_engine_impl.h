// The MPI progress engine's insides (comm/mpi_progress_engine.h), shared by its two files: the
// driving, the table of requests and their end (mpi_progress_engine.cpp), and messages of any
// length, framed, for listeners (mpi_progress_engine_messages.cpp). Not for other users.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/mpi_progress_engine.h"
#include "comm/progress_pacer.h"
#include "runtime/flight_recorder.h"

namespace weft {

namespace mpi_engine {

using Clock = std::chrono::steady_clock;

// Set while a thread runs a round: cancel_client from a completion would wait for itself.
extern thread_local bool t_driving;

// What MPI may still touch after its requests were given up: kept until the process ends
// (reachable, not leaked).
struct Graveyard {
  std::mutex mu;
  std::vector<std::shared_ptr<const void>> things;
  std::vector<MPI_Request> requests;
};
Graveyard& graveyard();

bool mpi_usable();

}  // namespace mpi_engine

using mpi_engine::Clock;

class MpiProgressEngine::Impl {
 public:
  Impl();
  ~Impl() { shut_down(); }

  ClientId add_client(std::string name, std::chrono::microseconds yield_after_traffic);
  void track(ClientId client, MPI_Request request, MpiOperation op, Done done, std::shared_ptr<const void> keep);
  void listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes, OnMessage on_message);
  void irecv_probed(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm, MpiOperation op,
                    Done done, std::shared_ptr<const void> keep);
  void probe_listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes, MpiOperation op,
                    OnMessage on_message);
  void cancel_client(ClientId client, std::chrono::milliseconds send_grace);
  bool flush_sends(ClientId client, std::chrono::milliseconds timeout);
  void expect_traffic();
  void wake();
  bool drive_until(const std::function<bool()>& done, Clock::time_point deadline);
  std::vector<MpiPending> pending() const;
  void shut_down();

 private:
  struct Client {
    std::string name;
    std::chrono::microseconds yield_after_traffic;
  };
  struct Entry {
    ClientId client = 0;
    MpiOperation op;
    Done done;
    std::shared_ptr<const void> keep;
    Clock::time_point since;
    std::chrono::microseconds yield_after_traffic{0};  // its client's
    FlightHandle flight;  // its entry in the flight recorder; empty for a standing receive
  };
  static Entry make_entry(ClientId client, MpiOperation op, Done done, std::shared_ptr<const void> keep,
                          std::chrono::microseconds yield_after_traffic) {
    return Entry{client, std::move(op), std::move(done), std::move(keep), Clock::now(), yield_after_traffic};
  }
  // A buffer for a standing receive of a frame whose last byte is the last of its mapping, an
  // inaccessible page after it: Open MPI 4.1's single-copy (CMA) read of a longer message, which
  // ignores the receive's length, stops there (the read fails, and MPI completes the receive as
  // an error) instead of writing past the buffer (comm/mpi_message_frame.h).
  class GuardedFrame {
   public:
    GuardedFrame();
    ~GuardedFrame();
    GuardedFrame(const GuardedFrame&) = delete;
    GuardedFrame& operator=(const GuardedFrame&) = delete;
    uint64_t* data() const { return frame_; }

   private:
    void* mapping_ = nullptr;
    size_t mapped_ = 0;
    uint64_t* frame_ = nullptr;
  };
  // A message a listener has begun to receive (its frame came); handed over in the order the
  // frames came.
  struct Incoming {
    MpiMessage message;
    bool continued = false;    // its continuation is still to come (probed for: probe_rest)
    bool discard = false;      // refused: its continuation is taken into nothing
    size_t rest = 0;           // the continuation's length, as the frame announced it
    size_t inline_bytes = 0;   // message bytes the frame held
    bool complete = false;
  };
  struct Listener {
    ClientId client = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    int tag = 0, source = MPI_ANY_SOURCE;
    size_t max_bytes = 0;
    OnMessage on_message;
    std::chrono::microseconds yield_after_traffic{0};  // its client's
    GuardedFrame frame;  // the standing receive's buffer
    std::deque<std::shared_ptr<Incoming>> incoming;  // the driver's
    bool continuing = false;  // in continuing_: a continuation of its messages is awaited
    bool dropped = false;  // its client was cancelled: its receive is not posted again
  };
  // A probe_listen: probed every round.
  struct Prober {
    ClientId client = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    int tag = 0, source = MPI_ANY_SOURCE;
    size_t max_bytes = 0;
    MpiOperation op;
    OnMessage on_message;
    std::atomic<bool> dropped{false};  // its client was cancelled
  };
  // A receive of a known length whose message is probed before it is posted (irecv_probed).
  struct Expected {
    void* buffer = nullptr;  // null: taken into nothing
    int bytes = 0;
    int peer = 0, tag = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    Entry entry;
  };
  struct Completed {
    Done done;
    MPI_Status status;
    int error;
    std::chrono::microseconds yield_after_traffic;
  };
  // What the driver does after a round.
  struct Pace {
    bool busy = false;
    bool yield = false;
    std::chrono::microseconds nap{20};
  };

  // Whether a request is waited for and cannot complete without this side's progress: receives
  // of an expected transfer, collectives, and sends above MPI's usual eager limit (their handshake
  // needs both sides). Not a standing receive (it waits for whatever comes; the engine's thread
  // takes it over within kLenderLapse) nor a small send (MPI delivers it without this side).
  static bool needs_driver(const MpiOperation& op) {
    return !op.standing && (!op.is_send || op.bytes > kEagerBytes);
  }
  static constexpr uint64_t kEagerBytes = 4096;

  void run();
  // One round by the thread holding drive_mu_: new requests adopted, listeners probed, requests
  // tested, completions run; then how to pace.
  Pace round();
  void adopt();                                      // drive_mu_ held
  // Posts the listener's standing receive of a frame (any thread).
  void post_frame(const std::shared_ptr<Listener>& l);
  // A frame came (driving thread): the message is complete, or its continuation is awaited.
  void on_frame(const std::shared_ptr<Listener>& l, const MPI_Status& status, int error);
  // Probes for the continuations the listeners' frames announced, and starts their receives;
  // whether any came (drive_mu_ held). Nothing to do, and no MPI call, while none is awaited.
  bool probe_continuations();
  // Probes for the continuation of `in`; whether it came.
  bool probe_rest(const std::shared_ptr<Listener>& l, const std::shared_ptr<Incoming>& in);
  bool test(std::vector<Completed>& completed);  // drive_mu_ held
  // Probes each probe_listen for messages and starts their receives; whether any came (drive_mu_ held).
  bool probe();
  // Probes for each irecv_probed's message and posts the receives of those that came, or takes
  // those of the wrong length into nothing (their `done` joins `completed`); whether any came
  // (drive_mu_ held).
  bool probe_expected(std::vector<Completed>& completed);
  // Adds a request the driver started to the table (drive_mu_ held).
  void add_to_table(MPI_Request request, Entry entry);
  void deliver_in_order(Listener& listener);         // drive_mu_ held
  // Removes the client's entries, cancelling what MPI can (drive_mu_ held).
  void give_up(ClientId client, std::chrono::milliseconds send_grace);
  // The flight recorder's entry of a request that completed (driving thread; a standing receive
  // that took a message is recorded whole here, its wait for whatever comes is not traffic).
  void record_completion(const Entry& e, const MPI_Status& status, int error, int64_t now_us);

  FlightRecorder& flight_ = process_flight_recorder();  // the process's, never destroyed

  mutable std::mutex mu_;  // guards up to drive_mu_
  // Drivers nap on nap_cv_, woken by new work; the engine's thread, standing back for a lender,
  // waits on standby_cv_, woken only to stop. A wake-up of a thread that has nothing to do costs a
  // context switch on a core the step needs (one per send, when they shared one).
  std::condition_variable nap_cv_;
  std::condition_variable standby_cv_;
  int nappers_ = 0;
  uint64_t wakes_ = 0;  // wake() calls: a napping driver whose count changed looks again
  bool standing_by_ = false;  // the engine's thread waits for a lender (on standby_cv_)
  // After the last round, requests in flight needed a driver (needs_driver).
  std::atomic<bool> needs_driver_{false};
  std::vector<Client> clients_;
  std::vector<std::pair<MPI_Request, Entry>> inbox_;  // tracked, not adopted yet
  std::vector<Expected> expected_inbox_;  // irecv_probed's, not adopted yet
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::vector<std::shared_ptr<Listener>> continuing_;  // the driver's: listeners awaiting a continuation
  std::vector<std::shared_ptr<Prober>> probers_;
  std::atomic<bool> probers_changed_{false};  // probers_ changed since the driver copied it
  std::vector<std::shared_ptr<Prober>> probing_;  // the driver's copy of probers_
  // The driver's hot loop reads these without the lock; they change under it (for the waits).
  std::atomic<bool> stop_{false};
  std::atomic<bool> inbox_ready_{false};  // inbox_ is not empty
  bool shut_ = false;
  std::atomic<bool> expecting_{false};
  std::atomic<int> lenders_{0};  // threads in drive_until: the engine's thread stands back
  // When the last round ended, by whichever driver (steady_clock ticks).
  std::atomic<Clock::rep> last_round_{Clock::now().time_since_epoch().count()};
  Clock::time_point last_round() const { return Clock::time_point(Clock::duration(last_round_.load())); }
  // How long a lender may go without a round before the engine's thread drives again: longer than
  // the longest nap, so a lender that naps is not doubled.
  static constexpr auto kLenderLapse = std::chrono::milliseconds(2);
  // Yields in a row a lender makes, idle, before it naps: a few hundred microseconds.
  static constexpr int kLenderYields = 2000;

  std::mutex drive_mu_;  // held by the driver for a whole round
  ProgressPacer pacer_;  // the driver's
  std::vector<Completed> completed_;  // the driver's
  std::vector<std::pair<MPI_Request, Entry>> adopting_;  // the driver's: the inbox being adopted
  std::vector<Expected> adopting_expected_;              // the driver's

  mutable std::mutex table_mu_;  // guards the table: the driver changes it, pending() reads it
  std::vector<MPI_Request> requests_;
  std::vector<Entry> entries_;  // parallel to requests_
  std::vector<Expected> expected_;  // irecv_probed's, waiting for their messages
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;

  std::thread thread_;
};

}  // namespace weft
