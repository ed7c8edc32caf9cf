// How the MPI progress engine (comm/mpi_progress_engine.h) paces its polling, measured on
// machines with fewer cores than threads.
//
// - Right after traffic an answer is likeliest: yield between polls for a short while (a yield
//   gives the core away only to threads that are ready, unlike a spin). Polling without any pause
//   took the core from the peer and made 1 MiB transfers ten times slower. How long depends on the
//   traffic: a collective's rounds each wait for a poll, so its client asks for longer.
// - Then short naps while traffic is recent or transfers are in flight (a large message's
//   handshake needs progress on this side too), longer ones once idle a while. The nap is most of
//   a small message's latency (20 us naps gave 63 us one way, 50 us naps 110 us); 20 us costs a
//   wake-up and a test per nap, so only for 2 ms after traffic.
// - New work wakes the driver at once through the engine's condition variable, whatever the nap.
#pragma once

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

namespace weft {

class ProgressPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // Naps of tens of microseconds are only that short with a small timer slack (Linux adds 50 us
  // to every timed wait of a thread by default, which would double a message's latency). Call it
  // on each thread that naps.
  static void shorten_timer_slack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

  // A polling round made progress (or new work arrived); yield for `yield_for` from now.
  // (`now`: the caller's reading of the clock, one per round.)
  void traffic(Clock::time_point now, std::chrono::microseconds yield_for) {
    idle_since_ = now;
    yield_for_ = yield_for;
  }
  // Whether to yield and poll again rather than nap.
  bool yield_now(Clock::time_point now) const { return now - idle_since_ < yield_for_; }
  // How long to nap before the next poll.
  std::chrono::microseconds nap(Clock::time_point now, bool in_flight) const {
    using namespace std::chrono;
    const auto idle = now - idle_since_;
    if (in_flight || idle < milliseconds(2)) return microseconds(20);
    return idle < milliseconds(20) ? microseconds(100) : microseconds(1000);
  }
  // Traffic is expected soon (a client was told; MPI cannot say): naps are short from now on,
  // as just after traffic, and a yielding spell goes on as it was.
  void expect_traffic(Clock::time_point now) { idle_since_ = std::max(idle_since_, now - yield_for_); }

 private:
  Clock::time_point idle_since_ = Clock::now();
  std::chrono::microseconds yield_for_{200};
};

}  // namespace weft
