// The progress engine records each request in the process's flight recorder
// (runtime/flight_recorder.h): a send/recv pair shows up with its peer, tag, bytes and "done"; a
// receive given up when its client is cancelled shows up "cancelled".
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "comm/mpi_progress_engine.h"
#include "runtime/flight_recorder.h"
#include "world.h"

namespace weft {
namespace {

using test_world::rank;
using test_world::size;

// The newest entry of `kind` with `tag` in this process's recorder, or null.
const FlightEntry* find(const std::vector<FlightEntry>& entries, const char* kind, int tag) {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it)
    if (std::string_view(it->kind) == kind && it->tag == tag) return &*it;
  return nullptr;
}

TEST(FlightRecorderEngine, ASendAndReceiveAreRecordedWithPeerBytesAndState) {
  ASSERT_TRUE(process_flight_recorder().enabled());
  MpiProgressEngine& engine = MpiProgressEngine::process();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const auto client = engine.add_client("test flight");
  constexpr int kTag = 41;
  constexpr int kBytes = 300;
  auto in = std::make_shared<std::vector<char>>(kBytes);
  auto out = std::make_shared<std::vector<char>>(kBytes, 'x');
  const int to = (rank() + 1) % size(), from = (rank() + size() - 1) % size();
  std::atomic<bool> received{false}, sent{false};
  ASSERT_EQ(engine.irecv(client, in->data(), kBytes, from, kTag, comm,
                         {.kind = "flight test recv", .peer = from, .tag = kTag, .bytes = kBytes},
                         [&](const MPI_Status&, int error) { received = error == MPI_SUCCESS; }, in),
            MPI_SUCCESS);
  ASSERT_EQ(engine.isend(client, out->data(), kBytes, to, kTag, comm,
                         {.kind = "flight test send", .peer = to, .tag = kTag, .bytes = kBytes},
                         [&](const MPI_Status&, int error) { sent = error == MPI_SUCCESS; }, out),
            MPI_SUCCESS);
  ASSERT_TRUE(engine.drive_until([&] { return received.load() && sent.load(); },
                                 std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  const std::vector<FlightEntry> entries = process_flight_recorder().snapshot();
  const FlightEntry* r = find(entries, "flight test recv", kTag);
  const FlightEntry* s = find(entries, "flight test send", kTag);
  ASSERT_NE(r, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(r->peer, from);
  EXPECT_EQ(s->peer, to);
  EXPECT_EQ(r->bytes, static_cast<uint64_t>(kBytes));
  EXPECT_EQ(s->bytes, static_cast<uint64_t>(kBytes));
  EXPECT_EQ(r->state, FlightState::kDone);
  EXPECT_EQ(s->state, FlightState::kDone);
  EXPECT_GE(r->end_us, r->start_us);
  EXPECT_GT(r->start_us, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

TEST(FlightRecorderEngine, AReceiveGivenUpIsRecordedCancelledAndAPendingOneStaysPending) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const auto client = engine.add_client("test flight cancel");
  constexpr int kTag = 42;
  auto in = std::make_shared<std::vector<char>>(16);
  ASSERT_EQ(engine.irecv(client, in->data(), 16, (rank() + 1) % size(), kTag, comm,
                         {.kind = "flight test never", .peer = (rank() + 1) % size(), .tag = kTag, .bytes = 16},
                         [](const MPI_Status&, int) {}, in),
            MPI_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<FlightEntry> before = process_flight_recorder().snapshot();
  const FlightEntry* p = find(before, "flight test never", kTag);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state, FlightState::kPending);
  engine.cancel_client(client, std::chrono::milliseconds(0));
  std::vector<FlightEntry> after = process_flight_recorder().snapshot();
  p = find(after, "flight test never", kTag);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state, FlightState::kCancelled);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace weft
