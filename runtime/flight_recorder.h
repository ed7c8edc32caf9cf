// The flight recorder: every process keeps its last few thousand transfers and collectives (what,
// with whom, how many bytes, when it started and ended, how it ended) in a fixed ring, so that when
// a step stalls, fails or loses a task the chief can gather every task's ring and write them to one
// file (cluster/flight_record_dump.h) that `weft-inspect` prints. PyTorch's NCCL flight recorder is
// the model.
//
//   FlightRecorder& fr = process_flight_recorder();
//   const FlightHandle h = fr.record_start({.kind = "payload send", .peer = 2, .tag = 7, .bytes = n});
//   ...                                  // later, on any thread:
//   fr.record_end(h, FlightState::kDone);
//   std::vector<FlightEntry> entries = fr.snapshot();   // oldest first
//
// Cost: recording is a few stores into a preallocated slot under one mutex (no allocation, no text:
// `kind` is a string literal, kept as a pointer). Who records: the MPI progress engine (one entry
// per request, comm/mpi_progress_engine.cpp) and the collective executor (one per collective
// instance, comm/collective_executor.cpp); never the executor's per-node path. A mutex, not a
// lock-free ring: every entry's writers are already on paths that take locks of their own, the
// critical section is a handful of stores, and a snapshot is rare.
//
// Wrapping: a handle carries its entry's sequence number; an end that comes after its slot was
// taken by a newer entry finds another sequence number there and is ignored, so a late end never
// corrupts the entry that replaced it.
//
// Size: WEFT_FLIGHT_RECORDER_ENTRIES (default 4096; 0 turns recording off: record_start returns an
// empty handle and takes no lock).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace weft {

enum class FlightState : uint8_t { kPending = 0, kDone = 1, kError = 2, kCancelled = 3 };

// "pending", "done", "error", "cancelled".
const char* flight_state_name(FlightState state);

// One transfer or collective. Plain data: a ring slot is overwritten in place.
struct FlightEntry {
  uint64_t seq = 0;          // 1, 2, ... in the order entries started in this process
  const char* kind = "";     // a string literal: "header send", "payload recv", "all-reduce", ...
  int32_t peer = -1;         // the peer's rank; -1: any, or a collective
  int32_t tag = -1;          // MPI tag; a collective's instance key
  uint64_t bytes = 0;
  int64_t group = -1;        // a collective's group key; -1 for transfers
  int64_t step = -1;         // a collective's step id; -1 where unknown
  int64_t start_us = 0;      // steady_clock, microseconds (flight_now_us)
  int64_t end_us = 0;        // 0 while pending
  FlightState state = FlightState::kPending;
};

// An entry being recorded; empty (seq 0) when recording is off.
struct FlightHandle {
  uint64_t seq = 0;
  explicit operator bool() const { return seq != 0; }
};

// steady_clock now, microseconds: the clock the timeline uses too, so the chief can move a task's
// entries onto its own clock the same way (cluster/cluster_timeline.cpp).
int64_t flight_now_us();
inline int64_t flight_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

class FlightRecorder {
 public:
  // `capacity` entries (0: off).
  explicit FlightRecorder(size_t capacity);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  size_t capacity() const { return ring_.size(); }
  bool enabled() const { return !ring_.empty(); }

  // Starts an entry: `e`'s seq, end and state are set here; start_us is now unless given.
  FlightHandle record_start(FlightEntry e);
  // Ends the entry of `h` with `state` at `end_us` (now when 0); `bytes`, when not 0, replaces
  // its bytes (a receive learns its size at the end). Ignored when `h` is empty, its slot has
  // been reused by a newer entry, or it has ended already.
  void record_end(FlightHandle h, FlightState state, int64_t end_us = 0, uint64_t bytes = 0);
  // Records an entry that has both started and ended (a message a standing receive took).
  void record(FlightEntry e);

  // Every entry held, oldest first.
  std::vector<FlightEntry> snapshot() const;
  // Entries started since the recorder was made (snapshot() holds at most capacity() of them).
  uint64_t recorded() const;

 private:
  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;  // slot of seq s: (s - 1) % capacity
  uint64_t next_seq_ = 1;          // guarded by mu_
};

// WEFT_FLIGHT_RECORDER_ENTRIES read from `text` (null: unset): 4096 when unset; a value that is
// not a whole number, or above kMaxFlightRecorderEntries, is reported on stderr and the default used.
inline constexpr size_t kDefaultFlightRecorderEntries = 4096;
inline constexpr size_t kMaxFlightRecorderEntries = size_t{1} << 20;
size_t flight_recorder_entries_from(const char* text);

// The process's recorder, made on first use with WEFT_FLIGHT_RECORDER_ENTRIES entries.
FlightRecorder& process_flight_recorder();

}  // namespace weft
