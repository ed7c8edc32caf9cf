// The process's MPI progress engine between the ranks of mpirun: messages of every length around
// the frame's size arrive whole and in order; one over the listener's limit is refused by name and
// never allocated, and the next still comes; damaged frames become errors naming the sender; the
// engine says what is pending, with peer, tag and age; a cancelled client's callbacks never run;
// drive_until returns when its condition holds and at its deadline otherwise; frames,
// continuations and irecv_probed's messages longer than announced are refused unread.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/mpi_message_frame.h"
#include "comm/mpi_progress_engine.h"
#include "world.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTag = 7;

using test_world::rank;
using test_world::size;

MPI_Comm fresh_comm() {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;  // kept until exit: the engine may still hold a cancelled receive on it
}

// Messages taken by a listener, waited for with a bound (a hang is a failure, not a stuck test).
class Inbox {
 public:
  void add(MpiMessage m) {
    std::lock_guard lock(mu_);
    messages_.push_back(std::move(m));
    cv_.notify_all();
  }
  MpiMessage next() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return !messages_.empty(); })) {
      ADD_FAILURE() << "no message came";
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MpiMessage m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<MpiMessage> messages_;
};

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 31 + static_cast<size_t>(seed)) & 0x7f);
  return v;
}

void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

TEST(MpiProgressEngine, MessagesOfEveryLengthArriveWholeAndInOrder) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test messages");
  Inbox inbox;
  engine.listen(client, comm, kTag, MPI_ANY_SOURCE, size_t{1} << 24, [&](MpiMessage m) { inbox.add(std::move(m)); });
  barrier();
  const size_t inline_bytes = mpi_frame::kInlineBytes;
  const std::vector<size_t> lengths = {0, 1, 7, 8, inline_bytes - 1, inline_bytes, inline_bytes + 1,
                                       3 * mpi_frame::kFrameBytes + 5, size_t{1} << 20};
  const int to = (rank() + 1) % size();
  std::vector<std::shared_ptr<std::vector<char>>> sent;
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto bytes = std::make_shared<std::vector<char>>(pattern(lengths[i], static_cast<int>(i) + rank()));
    ASSERT_EQ(engine.send_message(client, comm, to, kTag, bytes->data(), bytes->size(), bytes), MPI_SUCCESS);
    sent.push_back(bytes);
  }
  const int from = (rank() + size() - 1) % size();
  for (size_t i = 0; i < lengths.size(); ++i) {
    MpiMessage m = inbox.next();
    ASSERT_TRUE(m.error.empty()) << m.error;
    EXPECT_EQ(m.source, from);
    ASSERT_EQ(m.bytes, lengths[i]) << "message " << i << " out of order or cut";
    const std::vector<char> want = pattern(lengths[i], static_cast<int>(i) + from);
    if (!want.empty())  // (an empty message has no bytes to compare, nor a buffer)
      EXPECT_EQ(0, std::memcmp(m.words.data(), want.data(), want.size())) << "message " << i;
  }
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

TEST(MpiProgressEngine, AMessageOverTheLimitIsRefusedByLengthAndTheNextStillComes) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test limit");
  Inbox inbox;
  constexpr size_t kLimit = 3 * mpi_frame::kFrameBytes;
  engine.listen(client, comm, kTag, MPI_ANY_SOURCE, kLimit, [&](MpiMessage m) { inbox.add(std::move(m)); });
  barrier();
  const int to = (rank() + 1) % size();
  auto big = std::make_shared<std::vector<char>>(kLimit + 1, 'x');
  auto small = std::make_shared<std::vector<char>>(pattern(100, 1));
  ASSERT_EQ(engine.send_message(client, comm, to, kTag, big->data(), big->size(), big), MPI_SUCCESS);
  ASSERT_EQ(engine.send_message(client, comm, to, kTag, small->data(), small->size(), small), MPI_SUCCESS);
  MpiMessage refused = inbox.next();
  EXPECT_NE(refused.error.find(std::to_string(kLimit + 1) + " bytes, over the limit of " + std::to_string(kLimit)),
            std::string::npos)
      << refused.error;
  EXPECT_TRUE(refused.words.empty());
  MpiMessage next = inbox.next();
  ASSERT_TRUE(next.error.empty()) << next.error;
  ASSERT_EQ(next.bytes, 100u);
  EXPECT_EQ(0, std::memcmp(next.words.data(), small->data(), 100));
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

TEST(MpiProgressEngine, DamagedFramesAreErrorsNamingTheSender) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test damage");
  Inbox inbox;
  engine.listen(client, comm, kTag, MPI_ANY_SOURCE, size_t{1} << 20, [&](MpiMessage m) { inbox.add(std::move(m)); });
  barrier();
  const int to = (rank() + 1) % size();
  const int from = (rank() + size() - 1) % size();
  // Raw MPI, not send_message: a frame shorter than its length field, a frame whose length
  // disagrees with its bytes, and a continuation shorter than its frame announced. (Longer ones:
  // OverlongFramesAndContinuationsAreRefusedUnreadNamingTheSender.)
  const char three[3] = {1, 2, 3};
  MPI_Send(three, 3, MPI_BYTE, to, kTag, comm);
  const uint64_t lying[2] = {100, 0};
  MPI_Send(lying, 16, MPI_BYTE, to, kTag, comm);
  std::vector<uint64_t> frame(mpi_frame::kFrameBytes / sizeof(uint64_t), 0);
  frame[0] = mpi_frame::kInlineBytes + 100;
  const std::vector<char> short_rest(50, 0);
  MPI_Request r[2];
  MPI_Isend(frame.data(), static_cast<int>(mpi_frame::kFrameBytes), MPI_BYTE, to, kTag, comm, &r[0]);
  MPI_Isend(short_rest.data(), 50, MPI_BYTE, to, kTag + mpi_frame::kContinuationTagOffset, comm, &r[1]);
  for (const char* want : {"shorter than its length field", "for a message of 100",
                           "a continuation of 50 bytes, where its frame announced 100"}) {
    MpiMessage m = inbox.next();
    EXPECT_EQ(m.source, from);
    EXPECT_NE(m.error.find(want), std::string::npos) << m.error;
  }
  MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  // The listener still works after all that.
  auto ok = std::make_shared<std::vector<char>>(pattern(10, 3));
  ASSERT_EQ(engine.send_message(client, comm, to, kTag, ok->data(), ok->size(), ok), MPI_SUCCESS);
  MpiMessage m = inbox.next();
  EXPECT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(m.bytes, 10u);
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

// Longer than a frame may be, and a continuation longer than its frame announced: Open MPI 4.1's
// single-copy path used to write both past the end of the posted receive; now the frame's buffer
// ends at a guard page and continuations are probed (comm/mpi_message_frame.h). AddressSanitizer
// watches this test in the gate.
TEST(MpiProgressEngine, OverlongFramesAndContinuationsAreRefusedUnreadNamingTheSender) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test overlong");
  Inbox inbox;
  engine.listen(client, comm, kTag, MPI_ANY_SOURCE, size_t{1} << 20, [&](MpiMessage m) { inbox.add(std::move(m)); });
  barrier();
  const int to = (rank() + 1) % size();
  const int from = (rank() + size() - 1) % size();
  constexpr int kLong = 64 << 10;  // far above the eager limit: the single-copy path
  std::vector<uint64_t> overlong(kLong / sizeof(uint64_t), 0);
  overlong[0] = 100;  // a plausible length: only the frame's own size is wrong
  std::vector<uint64_t> frame(mpi_frame::kFrameBytes / sizeof(uint64_t), 0);
  frame[0] = mpi_frame::kInlineBytes + 100;  // announces a continuation of 100 bytes
  const std::vector<char> long_rest(kLong, 'r');
  MPI_Request r[3];
  MPI_Isend(overlong.data(), kLong, MPI_BYTE, to, kTag, comm, &r[0]);
  MPI_Isend(frame.data(), static_cast<int>(mpi_frame::kFrameBytes), MPI_BYTE, to, kTag, comm, &r[1]);
  MPI_Isend(long_rest.data(), kLong, MPI_BYTE, to, kTag + mpi_frame::kContinuationTagOffset, comm, &r[2]);
  for (const std::string want : {"a frame that could not be received (longer than " +
                                     std::to_string(mpi_frame::kFrameBytes) + " bytes, or damaged)",
                                 "a continuation of " + std::to_string(kLong) + " bytes, where its frame announced 100"}) {
    MpiMessage m = inbox.next();
    EXPECT_EQ(m.source, from);
    EXPECT_NE(m.error.find(want), std::string::npos) << m.error;
    EXPECT_TRUE(m.words.empty());
  }
  // Taken into nothing: the sends complete (the receiver's single-copy read of them fails).
  MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
  auto ok = std::make_shared<std::vector<char>>(pattern(mpi_frame::kFrameBytes * 2, 4));
  ASSERT_EQ(engine.send_message(client, comm, to, kTag, ok->data(), ok->size(), ok), MPI_SUCCESS);
  MpiMessage m = inbox.next();
  ASSERT_TRUE(m.error.empty()) << m.error;
  ASSERT_EQ(m.bytes, ok->size());
  const std::vector<char> want = pattern(mpi_frame::kFrameBytes * 2, 4);
  EXPECT_EQ(0, std::memcmp(m.words.data(), want.data(), want.size()));
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

// A receive of a known length: the message of exactly that length is received, a longer or a
// shorter one is refused unread, with its length in the status.
TEST(MpiProgressEngine, IrecvProbedTakesOnlyTheAnnouncedLength) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const auto client = engine.add_client("test probed");
  barrier();
  const int to = (rank() + 1) % size();
  const int from = (rank() + size() - 1) % size();
  constexpr int kAnnounced = 8 << 10;
  const std::vector<int> lengths = {kAnnounced, kAnnounced * 4, 10};
  std::vector<std::vector<char>> sent;
  std::vector<MPI_Request> sends(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    sent.push_back(pattern(static_cast<size_t>(lengths[i]), static_cast<int>(i)));
    MPI_Isend(sent.back().data(), lengths[i], MPI_BYTE, to, kTag + static_cast<int>(i), comm, &sends[i]);
  }
  struct Outcome {
    int error = -1;
    int count = -1;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Outcome> outcomes(lengths.size());
  int done = 0;
  auto buffer = std::make_shared<std::vector<char>>(kAnnounced + 64, 'z');  // a guard past the announced end
  for (size_t i = 0; i < lengths.size(); ++i)
    engine.irecv_probed(client, buffer->data(), kAnnounced, from, kTag + static_cast<int>(i), comm,
                        {.kind = "test recv", .peer = from}, [&, i](const MPI_Status& st, int error) {
                          int count = -1;
                          MPI_Get_count(&st, MPI_BYTE, &count);
                          std::lock_guard lock(mu);
                          outcomes[i] = {error, count};
                          ++done;
                          cv.notify_all();
                        }, buffer);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done == static_cast<int>(lengths.size()); }));
  }
  EXPECT_EQ(outcomes[0].error, MPI_SUCCESS);
  EXPECT_EQ(outcomes[0].count, kAnnounced);
  for (size_t i = 1; i < lengths.size(); ++i) {
    EXPECT_EQ(outcomes[i].error, MPI_ERR_TRUNCATE) << "message " << i;
    EXPECT_EQ(outcomes[i].count, lengths[i]) << "message " << i;
  }
  const std::vector<char> want = pattern(kAnnounced, 0);
  EXPECT_EQ(0, std::memcmp(buffer->data(), want.data(), want.size()));
  for (size_t i = kAnnounced; i < buffer->size(); ++i) ASSERT_EQ((*buffer)[i], 'z') << "written past the end";
  MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

TEST(MpiProgressEngine, PendingNamesEachRequestAndACancelledClientIsNeverCalledBack) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test pending");
  auto buffer = std::make_shared<std::vector<char>>(16);
  std::atomic<bool> called{false};
  // A receive nobody will match.
  ASSERT_EQ(engine.irecv(client, buffer->data(), 16, (rank() + 1) % size(), 99, comm,
                         {.kind = "test recv", .peer = (rank() + 1) % size(), .tag = 99, .bytes = 16, .what = "never"},
                         [&](const MPI_Status&, int) { called = true; }, buffer),
            MPI_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool found = false;
  for (const MpiPending& p : engine.pending()) {
    if (p.client != "test pending") continue;
    found = true;
    EXPECT_STREQ(p.op.kind, "test recv");
    EXPECT_EQ(p.op.peer, (rank() + 1) % size());
    EXPECT_EQ(p.op.tag, 99);
    EXPECT_EQ(p.op.bytes, 16u);
    EXPECT_EQ(p.op.what, "never");
    EXPECT_GE(p.age, std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(found) << "the pending receive is not reported";
  engine.cancel_client(client, std::chrono::milliseconds(0));
  for (const MpiPending& p : engine.pending()) EXPECT_NE(p.client, "test pending") << p.op.kind;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(called.load()) << "a cancelled client's callback ran";
  barrier();
}

TEST(MpiProgressEngine, DriveUntilReturnsWhenDoneOrAtTheDeadline) {
  MpiProgressEngine& engine = MpiProgressEngine::process();
  const auto t0 = Clock::now();
  EXPECT_FALSE(engine.drive_until([] { return false; }, t0 + std::chrono::milliseconds(30)));
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(30));
  EXPECT_LT(waited, std::chrono::seconds(2));
  // A completion driven by this thread makes the condition true.
  const MPI_Comm comm = fresh_comm();
  const auto client = engine.add_client("test drive");
  std::atomic<bool> received{false};
  auto in = std::make_shared<int>(0);
  auto out = std::make_shared<int>(rank() + 1);
  const int to = (rank() + 1) % size(), from = (rank() + size() - 1) % size();
  ASSERT_EQ(engine.irecv(client, in.get(), sizeof(int), from, 5, comm, {.kind = "recv", .peer = from, .tag = 5},
                         [&](const MPI_Status&, int error) { received = error == MPI_SUCCESS; }, in),
            MPI_SUCCESS);
  ASSERT_EQ(engine.isend(client, out.get(), sizeof(int), to, 5, comm, {.kind = "send", .peer = to, .tag = 5},
                         [](const MPI_Status&, int) {}, out),
            MPI_SUCCESS);
  EXPECT_TRUE(engine.drive_until([&] { return received.load(); }, Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(*in, from + 1);
  barrier();
  engine.cancel_client(client, std::chrono::milliseconds(100));
}

TEST(MpiMessageFrame, LengthsAreCheckedBeforeAnythingIsAllocated) {
  using mpi_frame::read_frame;
  EXPECT_TRUE(read_frame(8 + 10, 10, 100).error.empty());
  EXPECT_FALSE(read_frame(8 + 10, 10, 100).continued);
  EXPECT_NE(read_frame(4, 0, 100).error.find("shorter than its length field"), std::string::npos);
  EXPECT_NE(read_frame(8 + 9, 10, 100).error.find("expected 18"), std::string::npos);
  const auto over = read_frame(8, uint64_t{1} << 62, 100);
  EXPECT_NE(over.error.find("over the limit of 100"), std::string::npos);
  EXPECT_TRUE(over.continued) << "its continuation must be taken away";
  const auto big = read_frame(mpi_frame::kFrameBytes, mpi_frame::kInlineBytes + 1, size_t{1} << 20);
  EXPECT_TRUE(big.error.empty()) << big.error;
  EXPECT_TRUE(big.continued);
  EXPECT_EQ(big.inline_bytes, mpi_frame::kInlineBytes);
}

}  // namespace
}  // namespace weft
