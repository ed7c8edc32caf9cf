// How a thread that drives MPI's progress (MpiRendezvous's and MpiCollectives's) paces its
// polling: one policy for both, measured on machines with fewer cores than threads.
//
// - Right after traffic an answer is likeliest: yield between polls for a short while (a yield
//   gives the core away only to threads that are ready, unlike a spin). Polling without any pause
//   was tried: on a machine with fewer cores than threads it took the core from the peer and made
//   1 MiB transfers ten times slower.
// - Then short naps while traffic is recent or requests are in flight (a large message's handshake
//   needs progress on this side too), longer ones once idle a while. The nap is most of a small
//   message's latency (bench/mpi_rendezvous: 20 us naps gave 63 us one way, 50 us naps 110 us);
//   20 us costs a wake-up and a test per nap, so only for 2 ms after traffic.
// - New work wakes the thread at once through the owner's condition variable, whatever the nap.
#pragma once

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

namespace weft {

class ProgressPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // `yield_for`: how long after traffic to yield between polls rather than nap (MpiCollectives
  // takes longer than the default: see there).
  explicit ProgressPacer(std::chrono::microseconds yield_for = kDefaultYieldFor) : yield_for_(yield_for) {}

  // Naps of tens of microseconds are only that short with a small timer slack (Linux adds 50 us
  // to every timed wait of a thread by default, which would double a message's latency). Call it
  // on the progress thread.
  static void shorten_timer_slack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

  // A polling round made progress (or new work arrived).
  void traffic() { idle_since_ = Clock::now(); }
  // Whether to yield and poll again rather than nap.
  bool yield_now() const { return Clock::now() - idle_since_ < yield_for_; }
  // How long to nap before the next poll.
  std::chrono::microseconds nap(bool in_flight) const {
    using namespace std::chrono;
    const auto idle = Clock::now() - idle_since_;
    if (in_flight || idle < milliseconds(2)) return microseconds(20);
    return idle < milliseconds(20) ? microseconds(100) : microseconds(1000);
  }
  // After sleeping until woken: the first polls yield no longer, they nap.
  void woke_from_sleep() { idle_since_ = Clock::now() - yield_for_; }
  // Traffic is expected soon (the owner was told; MPI cannot say): naps are short from now on,
  // as just after traffic, and a yielding spell goes on as it was.
  void expect_traffic() { idle_since_ = std::max(idle_since_, Clock::now() - yield_for_); }

  static constexpr std::chrono::microseconds kDefaultYieldFor{200};

 private:
  std::chrono::microseconds yield_for_;
  Clock::time_point idle_since_ = Clock::now();
};

}  // namespace weft
