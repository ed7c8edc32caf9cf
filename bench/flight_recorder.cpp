// What the flight recorder (runtime/flight_recorder.h) costs each transfer it records: a
// record_start and its record_end, on one thread, on two at once (the engine's driver and a
// sending thread), and with recording off; against a steady_clock read, which the engine pays per
// request anyway. The executor's per-node path records nothing, so it is not measured here.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/flight_recorder.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

constexpr int kCalls = 1'000'000;

double ns_per_pair(FlightRecorder& fr) {
  return 1e9 * bench::seconds_per_call(
                   [&] {
                     const FlightHandle h = fr.record_start({.kind = "payload send", .peer = 1, .tag = 7, .bytes = 64});
                     fr.record_end(h, FlightState::kDone);
                   },
                   kCalls);
}

// Per pair, per thread, while another thread records into the same ring.
double ns_per_pair_contended(FlightRecorder& fr) {
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const FlightHandle h = fr.record_start({.kind = "payload recv", .peer = 2, .tag = 7, .bytes = 64});
      fr.record_end(h, FlightState::kDone);
    }
  });
  const double ns = ns_per_pair(fr);
  stop = true;
  other.join();
  return ns;
}

}  // namespace

int main() {
  FlightRecorder on(kDefaultFlightRecorderEntries), off(0);
  const double clock_ns =
      1e9 * bench::seconds_per_call([] { (void)std::chrono::steady_clock::now(); }, kCalls);
  std::vector<Row> rows;
  rows.push_back({"steady_clock::now (reference)", fmt("%.1f ns", clock_ns), "-", "-", "-"});
  rows.push_back({"start + end, recording off", fmt("%.1f ns", ns_per_pair(off)), "-", "-", "-"});
  rows.push_back({"start + end, 4096 entries", fmt("%.1f ns", ns_per_pair(on)), "-", "-", "-"});
  rows.push_back({"start + end, another thread recording", fmt("%.1f ns", ns_per_pair_contended(on)), "-", "-", "-"});
  bench::print_table("flight recorder: cost per recorded transfer", rows);
}
