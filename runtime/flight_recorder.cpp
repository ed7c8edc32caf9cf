#include "runtime/flight_recorder.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>

namespace weft {

const char* flight_state_name(FlightState state) {
  switch (state) {
    case FlightState::kPending: return "pending";
    case FlightState::kDone: return "done";
    case FlightState::kError: return "error";
    case FlightState::kCancelled: return "cancelled";
  }
  return "unknown";
}

int64_t flight_now_us() { return flight_us(std::chrono::steady_clock::now()); }

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity) {}

FlightHandle FlightRecorder::record_start(FlightEntry e) {
  if (ring_.empty()) return {};
  if (e.start_us == 0) e.start_us = flight_now_us();
  e.end_us = 0;
  e.state = FlightState::kPending;
  std::lock_guard lock(mu_);
  e.seq = next_seq_++;
  ring_[(e.seq - 1) % ring_.size()] = e;
  return {e.seq};
}

void FlightRecorder::record_end(FlightHandle h, FlightState state, int64_t end_us, uint64_t bytes) {
  if (!h || ring_.empty()) return;
  if (end_us == 0) end_us = flight_now_us();
  std::lock_guard lock(mu_);
  FlightEntry& slot = ring_[(h.seq - 1) % ring_.size()];
  // Another sequence number: the ring wrapped and a newer entry took the slot; this one is gone.
  if (slot.seq != h.seq || slot.state != FlightState::kPending) return;
  slot.end_us = end_us;
  slot.state = state;
  if (bytes != 0) slot.bytes = bytes;
}

void FlightRecorder::record(FlightEntry e) {
  if (ring_.empty()) return;
  const int64_t now = flight_now_us();
  if (e.start_us == 0) e.start_us = now;
  if (e.end_us == 0) e.end_us = now;
  std::lock_guard lock(mu_);
  e.seq = next_seq_++;
  ring_[(e.seq - 1) % ring_.size()] = e;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::vector<FlightEntry> out;
  if (ring_.empty()) return out;
  out.reserve(ring_.size());
  std::lock_guard lock(mu_);
  const uint64_t held = std::min<uint64_t>(next_seq_ - 1, ring_.size());
  for (uint64_t s = next_seq_ - held; s < next_seq_; ++s) out.push_back(ring_[(s - 1) % ring_.size()]);
  return out;
}

uint64_t FlightRecorder::recorded() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

size_t flight_recorder_entries_from(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultFlightRecorderEntries;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || n > kMaxFlightRecorderEntries) {
    std::cerr << "weft: WEFT_FLIGHT_RECORDER_ENTRIES=" << text << " is not a whole number of entries from 0 to "
              << kMaxFlightRecorderEntries << "; using " << kDefaultFlightRecorderEntries << "\n";
    return kDefaultFlightRecorderEntries;
  }
  return static_cast<size_t>(n);
}

FlightRecorder& process_flight_recorder() {
  // Never destroyed: the progress engine's thread may record until the process ends.
  static auto* recorder = new FlightRecorder(flight_recorder_entries_from(std::getenv("WEFT_FLIGHT_RECORDER_ENTRIES")));
  return *recorder;
}

}  // namespace weft
