// The flight recorder's ring (runtime/flight_recorder.h): it keeps the last N entries in the order
// they started, a wrapped ring's late end does not touch the entry that replaced it, a snapshot
// taken while other threads record is whole, and 0 entries turns it off.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/flight_recorder.h"

namespace weft {
namespace {

FlightEntry transfer(int peer, uint64_t bytes) {
  return FlightEntry{.kind = "payload send", .peer = peer, .tag = 7, .bytes = bytes};
}

TEST(FlightRecorder, KeepsEntriesInOrderWithTheirEnds) {
  FlightRecorder fr(8);
  const FlightHandle a = fr.record_start(transfer(1, 10));
  const FlightHandle b = fr.record_start(transfer(2, 20));
  fr.record_end(a, FlightState::kDone);
  fr.record_end(b, FlightState::kError);
  fr.record_end(b, FlightState::kDone);  // a second end is ignored
  const std::vector<FlightEntry> s = fr.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].seq, 1u);
  EXPECT_EQ(s[0].peer, 1);
  EXPECT_EQ(s[0].bytes, 10u);
  EXPECT_EQ(s[0].state, FlightState::kDone);
  EXPECT_GE(s[0].end_us, s[0].start_us);
  EXPECT_EQ(s[1].peer, 2);
  EXPECT_EQ(s[1].state, FlightState::kError);
  EXPECT_STREQ(s[1].kind, "payload send");
}

TEST(FlightRecorder, PendingEntriesHaveNoEnd) {
  FlightRecorder fr(4);
  fr.record_start(transfer(3, 1));
  const std::vector<FlightEntry> s = fr.snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].state, FlightState::kPending);
  EXPECT_EQ(s[0].end_us, 0);
  EXPECT_STREQ(flight_state_name(s[0].state), "pending");
}

TEST(FlightRecorder, WrapsKeepingTheLastN) {
  FlightRecorder fr(4);
  for (int i = 0; i < 10; ++i) fr.record_start(transfer(i, static_cast<uint64_t>(i)));
  const std::vector<FlightEntry> s = fr.snapshot();
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s[i].peer, static_cast<int>(6 + i));
    EXPECT_EQ(s[i].seq, 7 + i);
  }
  EXPECT_EQ(fr.recorded(), 10u);
}

TEST(FlightRecorder, ALateEndOfAnOverwrittenEntryIsIgnored) {
  FlightRecorder fr(2);
  const FlightHandle old = fr.record_start(transfer(1, 1));  // slot 0
  fr.record_start(transfer(2, 2));                           // slot 1
  const FlightHandle fresh = fr.record_start(transfer(3, 3));  // slot 0 again
  fr.record_end(old, FlightState::kError, 123);
  std::vector<FlightEntry> s = fr.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].peer, 3);
  EXPECT_EQ(s[1].state, FlightState::kPending);  // untouched by the old entry's end
  EXPECT_EQ(s[1].end_us, 0);
  fr.record_end(fresh, FlightState::kDone, 456);
  s = fr.snapshot();
  EXPECT_EQ(s[1].state, FlightState::kDone);
  EXPECT_EQ(s[1].end_us, 456);
}

TEST(FlightRecorder, ZeroEntriesIsOff) {
  FlightRecorder fr(0);
  EXPECT_FALSE(fr.enabled());
  const FlightHandle h = fr.record_start(transfer(1, 1));
  EXPECT_FALSE(h);
  fr.record_end(h, FlightState::kDone);
  fr.record(transfer(1, 1));
  EXPECT_TRUE(fr.snapshot().empty());
}

TEST(FlightRecorder, RecordsAWholeEntry) {
  FlightRecorder fr(4);
  fr.record(FlightEntry{.kind = "message recv", .peer = 0, .bytes = 64, .start_us = 5, .end_us = 9,
                        .state = FlightState::kDone});
  const std::vector<FlightEntry> s = fr.snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].state, FlightState::kDone);
  EXPECT_EQ(s[0].start_us, 5);
  EXPECT_EQ(s[0].end_us, 9);
}

TEST(FlightRecorder, SnapshotsWhileOthersRecordAreWhole) {
  FlightRecorder fr(64);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      while (!stop.load()) {
        // Every entry's bytes are its peer times 1000: a torn entry would break the pairing.
        const FlightHandle h = fr.record_start(transfer(t, static_cast<uint64_t>(t) * 1000));
        fr.record_end(h, FlightState::kDone);
      }
    });
  for (int i = 0; i < 200; ++i) {
    const std::vector<FlightEntry> s = fr.snapshot();
    ASSERT_LE(s.size(), 64u);
    for (size_t k = 0; k < s.size(); ++k) {
      EXPECT_EQ(s[k].bytes, static_cast<uint64_t>(s[k].peer) * 1000);
      if (k > 0) {
        EXPECT_EQ(s[k].seq, s[k - 1].seq + 1);
      }
    }
  }
  stop = true;
  for (std::thread& w : writers) w.join();
}

TEST(FlightRecorder, EntriesSettingFromTheEnvironment) {
  EXPECT_EQ(flight_recorder_entries_from(nullptr), kDefaultFlightRecorderEntries);
  EXPECT_EQ(flight_recorder_entries_from(""), kDefaultFlightRecorderEntries);
  EXPECT_EQ(flight_recorder_entries_from("0"), 0u);
  EXPECT_EQ(flight_recorder_entries_from("100"), 100u);
  EXPECT_EQ(flight_recorder_entries_from("-3"), kDefaultFlightRecorderEntries);
  EXPECT_EQ(flight_recorder_entries_from("12x"), kDefaultFlightRecorderEntries);
  EXPECT_EQ(flight_recorder_entries_from("99999999999"), kDefaultFlightRecorderEntries);
}

}  // namespace
}  // namespace weft
