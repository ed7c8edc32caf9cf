// LocalRendezvous: send and recv meet by key in either order, hand the buffer over without a
// copy, and every recv hears back exactly once, also when the rendezvous or a step is aborted or
// cleaned up, and from many threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "runtime/local_rendezvous.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

constexpr const char* kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr const char* kCpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";

RendezvousKey key(const std::string& edge, int64_t step = 1) {
  return {kCpu0, process_incarnation(), kCpu1, edge, step};
}

Tensor floats(std::vector<float> v) {
  return Tensor::from_host(float32, {static_cast<int64_t>(v.size())}, v.data());
}

// What a recv callback was called with, and how often.
struct Outcome {
  int calls = 0;
  std::exception_ptr error;
  Tensor value;
  bool is_dead = false;
  std::thread::id thread;

  Rendezvous::DoneCallback callback() {
    return [this](std::exception_ptr e, Tensor v, bool dead) {
      ++calls;
      error = std::move(e);
      value = std::move(v);
      is_dead = dead;
      thread = std::this_thread::get_id();
    };
  }
};

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.what();
  }
}

TEST(LocalRendezvous, SendThenRecvHandsTheBufferOverInline) {
  LocalRendezvous rdv;
  Tensor t = floats({1, 2, 3});
  rdv.send(key("x:0"), t);
  EXPECT_EQ(rdv.pending(), 1u);
  Outcome got;
  rdv.recv_async(key("x:0"), got.callback());
  ASSERT_EQ(got.calls, 1) << "the tensor was there: the callback runs inline";
  EXPECT_EQ(got.thread, std::this_thread::get_id());
  EXPECT_FALSE(got.error);
  EXPECT_FALSE(got.is_dead);
  EXPECT_EQ(raw_data(got.value), raw_data(t)) << "no copy";
  EXPECT_EQ(got.value.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(LocalRendezvous, RecvThenSendCompletesOnTheSendersThread) {
  LocalRendezvous rdv;
  Outcome got;
  rdv.recv_async(key("x:0"), got.callback());
  EXPECT_EQ(got.calls, 0);
  EXPECT_EQ(rdv.pending(), 1u);
  Tensor t = floats({4, 5});
  std::thread::id sender;
  std::thread th([&] {
    sender = std::this_thread::get_id();
    rdv.send(key("x:0"), t, /*is_dead=*/true);
    EXPECT_EQ(got.calls, 1) << "delivered before send returned";
  });
  th.join();
  ASSERT_EQ(got.calls, 1);
  EXPECT_EQ(got.thread, sender);
  EXPECT_FALSE(got.error);
  EXPECT_TRUE(got.is_dead);
  EXPECT_EQ(raw_data(got.value), raw_data(t));
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(LocalRendezvous, EveryFieldOfTheKeyMatters) {
  LocalRendezvous rdv;
  RendezvousKey base = key("x:0", 5);
  std::vector<RendezvousKey> others(5, base);
  others[0].src_device = "/job:localhost/replica:0/task:0/device:CPU:2";
  others[1].src_incarnation ^= 1;
  others[2].dst_device = kCpu0;
  others[3].edge_name = "x:1";
  others[4].step_id = 6;
  rdv.send(base, floats({1}));
  std::vector<Outcome> got(others.size());
  for (size_t i = 0; i < others.size(); ++i) rdv.recv_async(others[i], got[i].callback());
  for (const Outcome& o : got) EXPECT_EQ(o.calls, 0);
  EXPECT_EQ(rdv.pending(), 1 + others.size());
  Outcome match;
  rdv.recv_async(base, match.callback());
  EXPECT_EQ(match.calls, 1);
  rdv.cleanup_step(5);
  rdv.cleanup_step(6);
  for (const Outcome& o : got) EXPECT_EQ(o.calls, 1) << "failed by the cleanup";
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(LocalRendezvous, DuplicateSendIsAnError) {
  LocalRendezvous rdv;
  Tensor first = floats({1});
  rdv.send(key("x:0"), first);
  try {
    rdv.send(key("x:0"), floats({2}));
    FAIL() << "a second send of one key must fail";
  } catch (const Internal& e) {
    EXPECT_NE(std::string(e.what()).find("sent twice"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(key("x:0").to_string()), std::string::npos) << e.what();
  }
  Outcome got;
  rdv.recv_async(key("x:0"), got.callback());
  EXPECT_EQ(raw_data(got.value), raw_data(first)) << "the first send stands";
}

TEST(LocalRendezvous, SecondRecvOfAKeyFailsAndTheFirstStillGetsTheTensor) {
  LocalRendezvous rdv;
  Outcome first, second;
  rdv.recv_async(key("x:0"), first.callback());
  rdv.recv_async(key("x:0"), second.callback());
  ASSERT_EQ(second.calls, 1);
  EXPECT_THROW(std::rethrow_exception(second.error), Internal);
  EXPECT_FALSE(second.value.defined());
  rdv.send(key("x:0"), floats({3}));
  EXPECT_EQ(first.calls, 1);
  EXPECT_FALSE(first.error);
}

TEST(LocalRendezvous, AbortFailsPendingAndFutureRecvsAndSends) {
  LocalRendezvous rdv;
  std::vector<Outcome> waiting(3);
  for (int i = 0; i < 3; ++i) rdv.recv_async(key("w:" + std::to_string(i), i), waiting[i].callback());
  rdv.send(key("leftover:0"), floats({1}));
  EXPECT_EQ(rdv.pending(), 4u);
  rdv.start_abort(std::make_exception_ptr(Unavailable("[step] task 2 was lost")));
  for (const Outcome& o : waiting) {
    ASSERT_EQ(o.calls, 1);
    EXPECT_THROW(std::rethrow_exception(o.error), Unavailable);
    EXPECT_EQ(message_of(o.error), "[step] task 2 was lost");
  }
  EXPECT_EQ(rdv.pending(), 0u) << "the tensors nobody received are dropped";

  Outcome late;
  rdv.recv_async(key("late:0"), late.callback());
  ASSERT_EQ(late.calls, 1) << "a recv after the abort fails at once";
  EXPECT_THROW(std::rethrow_exception(late.error), Unavailable);
  EXPECT_THROW(rdv.send(key("late:0"), floats({1})), Unavailable);

  rdv.start_abort(std::make_exception_ptr(Internal("second")));
  Outcome later;
  rdv.recv_async(key("later:0"), later.callback());
  EXPECT_EQ(message_of(later.error), "[step] task 2 was lost") << "the first abort wins";
  EXPECT_THROW(rdv.start_abort(nullptr), InvalidArgument);
}

TEST(LocalRendezvous, AbortStepFailsThatStepOnly) {
  LocalRendezvous rdv;
  Outcome in7, in8;
  rdv.recv_async(key("x:0", 7), in7.callback());
  rdv.recv_async(key("x:0", 8), in8.callback());
  rdv.send(key("y:0", 7), floats({1}));
  rdv.abort_step(7, std::make_exception_ptr(Unavailable("[step] step 7 failed")));
  ASSERT_EQ(in7.calls, 1);
  EXPECT_THROW(std::rethrow_exception(in7.error), Unavailable);
  EXPECT_EQ(in8.calls, 0);
  EXPECT_EQ(rdv.pending(), 1u) << "step 8's recv waits on";
  EXPECT_THROW(rdv.send(key("z:0", 7), floats({1})), Unavailable);
  Outcome late7;
  rdv.recv_async(key("z:0", 7), late7.callback());
  EXPECT_EQ(late7.calls, 1);
  EXPECT_TRUE(late7.error);

  rdv.send(key("x:0", 8), floats({2}));
  EXPECT_EQ(in8.calls, 1);
  EXPECT_FALSE(in8.error);

  rdv.cleanup_step(7);
  rdv.send(key("again:0", 7), floats({1}));  // cleanup forgot the abort
  EXPECT_EQ(rdv.pending(), 1u);
  EXPECT_THROW(rdv.abort_step(7, nullptr), InvalidArgument);
}

TEST(LocalRendezvous, CleanupStepDropsLeftoversAndFailsWaitingRecvs) {
  LocalRendezvous rdv;
  rdv.send(key("a:0", 3), floats({1}));
  rdv.send(key("b:0", 3), floats({1}));
  rdv.send(key("a:0", 4), floats({1}));
  Outcome waiting3, waiting4;
  rdv.recv_async(key("c:0", 3), waiting3.callback());
  rdv.recv_async(key("c:0", 4), waiting4.callback());
  EXPECT_EQ(rdv.pending(), 5u);
  rdv.cleanup_step(3);
  EXPECT_EQ(rdv.pending(), 2u);
  ASSERT_EQ(waiting3.calls, 1);
  EXPECT_THROW(std::rethrow_exception(waiting3.error), FailedPrecondition);
  EXPECT_NE(message_of(waiting3.error).find(key("c:0", 3).to_string()), std::string::npos)
      << message_of(waiting3.error);
  EXPECT_EQ(waiting4.calls, 0);
  rdv.cleanup_step(3);  // nothing left: harmless
  rdv.cleanup_step(4);
  EXPECT_EQ(rdv.pending(), 0u);
  EXPECT_EQ(waiting4.calls, 1);
}

TEST(LocalRendezvous, DestroyingItFailsWaitingRecvs) {
  Outcome got;
  {
    LocalRendezvous rdv;
    rdv.recv_async(key("x:0"), got.callback());
    rdv.send(key("y:0"), floats({1}));
  }
  ASSERT_EQ(got.calls, 1);
  EXPECT_THROW(std::rethrow_exception(got.error), FailedPrecondition);
}

TEST(LocalRendezvous, BlockingRecv) {
  LocalRendezvous rdv;
  Tensor t = floats({9});
  std::thread sender([&] { rdv.send(key("x:0"), t); });
  Rendezvous::Received r = rdv.recv(key("x:0"), std::chrono::seconds(60));
  sender.join();
  EXPECT_EQ(raw_data(r.value), raw_data(t));
  EXPECT_FALSE(r.is_dead);

  try {
    rdv.recv(key("never:0"), std::chrono::milliseconds(1));
    FAIL() << "nothing was sent";
  } catch (const DeadlineExceeded& e) {
    EXPECT_NE(std::string(e.what()).find(key("never:0").to_string()), std::string::npos) << e.what();
  }
  rdv.send(key("never:0"), floats({1}));  // the timed-out recv takes it; nothing dangles

  rdv.abort_step(2, std::make_exception_ptr(Unavailable("[step] gone")));
  EXPECT_THROW(rdv.recv(key("x:0", 2), std::chrono::seconds(60)), Unavailable);
}

// Senders and receivers on many threads, in random order: every recv gets its own tensor once.
TEST(LocalRendezvous, ManyThreadsEachTensorArrivesOnce) {
  constexpr int kThreads = 4, kKeys = 4000;
  LocalRendezvous rdv;
  std::vector<Tensor> sent(kKeys);
  for (int i = 0; i < kKeys; ++i) sent[i] = floats({static_cast<float>(i)});
  std::vector<std::atomic<int>> calls(kKeys);
  std::vector<std::atomic<const void*>> got(kKeys);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {  // senders: a shuffled share of the keys
      std::vector<int> mine;
      for (int i = t; i < kKeys; i += kThreads) mine.push_back(i);
      std::shuffle(mine.begin(), mine.end(), std::mt19937(t));
      for (int i : mine) rdv.send(key("e:" + std::to_string(i), i % 7), sent[i]);
    });
    threads.emplace_back([&, t] {  // receivers: another share
      std::vector<int> mine;
      for (int i = (t + 1) % kThreads; i < kKeys; i += kThreads) mine.push_back(i);
      std::shuffle(mine.begin(), mine.end(), std::mt19937(100 + t));
      for (int i : mine)
        rdv.recv_async(key("e:" + std::to_string(i), i % 7), [&, i](std::exception_ptr e, Tensor v, bool) {
          if (e) errors++;
          else got[i] = raw_data(v);
          calls[i]++;
        });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(calls[i].load(), 1) << "key " << i;
    ASSERT_EQ(got[i].load(), raw_data(sent[i])) << "key " << i;
  }
  EXPECT_EQ(rdv.pending(), 0u);
}

// An abort racing with recvs and sends on other threads: each recv still hears back exactly
// once, with its tensor or with the abort error.
TEST(LocalRendezvous, AbortRacingWithTrafficAnswersEveryRecvOnce) {
  constexpr int kKeys = 3000;
  LocalRendezvous rdv;
  std::vector<std::atomic<int>> calls(kKeys);
  std::atomic<bool> go{false};
  std::thread receiver([&] {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < kKeys; ++i)
      rdv.recv_async(key("e:" + std::to_string(i)), [&, i](std::exception_ptr, Tensor, bool) { calls[i]++; });
  });
  std::thread sender([&] {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < kKeys; ++i) {
      try {
        rdv.send(key("e:" + std::to_string(i)), floats({1}));
      } catch (const Unavailable&) {
      }
    }
  });
  std::thread aborter([&] {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < 100; ++i) std::this_thread::yield();
    rdv.start_abort(std::make_exception_ptr(Unavailable("[step] abort")));
  });
  go = true;
  receiver.join();
  sender.join();
  aborter.join();
  for (int i = 0; i < kKeys; ++i) ASSERT_EQ(calls[i].load(), 1) << "key " << i;
  EXPECT_EQ(rdv.pending(), 0u);
}

// What a waiting recv said it expects is there for a rendezvous from another process to read
// before it receives a tensor's bytes (comm/mpi_rendezvous.cpp), and only while the recv waits.
TEST(LocalRendezvous, AWaitingRecvsExpectationIsReadableUntilItsTensorComes) {
  LocalRendezvous rdv;
  Outcome expecting, plain;
  rdv.recv_async_expecting(key("e:0"), {DType::Float32, Shape{-1, 3}}, expecting.callback());
  rdv.recv_async(key("p:0"), plain.callback());
  RecvExpectation got;
  ASSERT_TRUE(rdv.expectation_of(key("e:0"), got));
  EXPECT_EQ(got.to_string(), "float32(None, 3)");
  EXPECT_TRUE(got.admits(DType::Float32, Shape{7, 3}));
  EXPECT_FALSE(got.admits(DType::Float32, Shape{7, 4}));
  EXPECT_FALSE(got.admits(DType::Int32, Shape{7, 3}));
  EXPECT_FALSE(got.admits(DType::Float32, Shape{21}));
  EXPECT_FALSE(rdv.expectation_of(key("p:0"), got)) << "a recv that said nothing";
  EXPECT_FALSE(rdv.expectation_of(key("none:0"), got)) << "no recv";
  rdv.send(key("e:0"), floats({1, 2, 3}));
  EXPECT_EQ(expecting.calls, 1);
  EXPECT_FALSE(rdv.expectation_of(key("e:0"), got)) << "the recv has its tensor";
  rdv.send(key("p:0"), floats({1}));
  EXPECT_EQ(plain.calls, 1);
}

}  // namespace
}  // namespace weft
