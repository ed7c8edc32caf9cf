// What the MPI rendezvous refuses before a tensor's bytes are received: a payload longer than its
// header announced (probed, refused unread, the sender named), and a header its waiting Recv
// cannot take (its dtype or shape), which fails that step only while the stream of tensors from
// the peer stays in step. AddressSanitizer watches these in the gate: before payloads were
// probed, Open MPI 4.1's single-copy path wrote a longer payload past the tensor's buffer.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/mpi_rendezvous.h"
#include "comm/mpi_rendezvous_wire.h"
#include "mpi_rendezvous_fixture.h"
#include "runtime/error.h"

namespace weft {
namespace {

// Rank 0 plays a broken peer: a well-formed header for 4 floats, then 64 KiB on its payload's tag.
TEST_F(MpiRendezvousTest, APayloadLongerThanItsHeaderAnnouncedIsRefusedUnread) {
  auto rdv = make();
  const RendezvousKey k = key(0, 1, "long:0");
  Pending waiting;
  if (me_ == 1) rdv->recv_async(k, waiting.callback());
  sync();
  constexpr int kLong = 64 << 10;  // above the eager limit: the single-copy path
  if (me_ == 0) {
    mpi_wire::WireHeader h;
    h.key = k;
    h.dtype = DType::Float32;
    h.shape = Shape{4};
    h.total_bytes = 16;
    h.chunk_bytes = mpi_wire::chunk_bytes_for(16, size_t{1} << 30);
    h.tag = 5;
    const std::string header = mpi_wire::encode_header(h);
    const std::vector<char> payload(kLong, 'p');
    MPI_Send(header.data(), static_cast<int>(header.size()), MPI_BYTE, 1, kMpiRendezvousHeaderTag, comm_);
    MPI_Send(payload.data(), kLong, MPI_BYTE, 1, 5, comm_);
  }
  if (me_ != 1) return;
  ASSERT_TRUE(waiting.wait()) << "a payload longer than announced must fail the recv";
  EXPECT_THROW(std::rethrow_exception(waiting.error), InvalidArgument);
  const std::string m = message_of(waiting.error);
  EXPECT_NE(m.find("rank 0 sent its payload of key " + k.to_string()), std::string::npos) << m;
  EXPECT_NE(m.find("a message of " + std::to_string(kLong) + " bytes, where its header announced 16"),
            std::string::npos)
      << m;
}

// Rank 0 sends rank 1 a tensor its Recv cannot take (int32 where it expects float32), then two it
// can: the first fails its step, naming the key, the peer and both types, and the others arrive.
TEST_F(MpiRendezvousTest, AHeaderItsRecvCannotTakeFailsTheStepBeforeItsBytesCome) {
  auto rdv = make();
  const int from = 0, to = 1;
  const RendezvousKey wrong = key(from, to, "wrong:0", 3), whole = key(from, to, "whole:0", 4),
                      partial = key(from, to, "partial:0", 4);
  Pending refused, exact, some_dims;
  if (me_ == to) {
    rdv->recv_async_expecting(wrong, {DType::Float32, Shape{-1, 256}}, refused.callback());
    rdv->recv_async_expecting(whole, {DType::Int32, Shape{1000}}, exact.callback());
    rdv->recv_async_expecting(partial, {DType::Float32, Shape{-1, 4}}, some_dims.callback());
  }
  sync();  // the recvs wait before the headers come
  // 64 KiB: above the eager limit, so its payload would have been read into a buffer of the
  // announced size; it is taken into nothing instead.
  const Tensor big = make_tensor(DType::Int32, {64, 256}, from, to, 0);
  const Tensor ints = make_tensor(DType::Int32, {1000}, from, to, 1);
  const Tensor floats = make_tensor(DType::Float32, {3, 4}, from, to, 2);
  if (me_ == from) {
    rdv->send(wrong, big);
    rdv->send(whole, ints);
    rdv->send(partial, floats);
  }
  if (me_ == to) {
    ASSERT_TRUE(refused.wait());
    EXPECT_THROW(std::rethrow_exception(refused.error), InvalidArgument);
    const std::string m = message_of(refused.error);
    EXPECT_NE(m.find("rank 0 announced key " + wrong.to_string() + " as int32(64, 256) (65536 bytes), where its Recv "
                     "expects float32(None, 256)"),
              std::string::npos)
        << m;
    EXPECT_FALSE(refused.value.defined());
    ASSERT_TRUE(exact.wait());
    ASSERT_FALSE(exact.error) << message_of(exact.error);
    expect_same(exact.value, ints, "the tensor after the refused one");
    ASSERT_TRUE(some_dims.wait());
    ASSERT_FALSE(some_dims.error) << message_of(some_dims.error);
    expect_same(some_dims.value, floats, "a tensor whose Recv knows some dims");
  }
  sync();
  rdv->cleanup_step(3);
  rdv->cleanup_step(4);
}

// A header that came before its Recv is not checked against it here (nothing said what to
// expect): the tensor is received, and the Recv kernel checks it when they meet.
TEST_F(MpiRendezvousTest, AHeaderBeforeItsRecvIsReceivedAndCheckedWhenTheyMeet) {
  auto rdv = make();
  const int from = 0, to = 1;
  const RendezvousKey early = key(from, to, "early:0", 5), after = key(from, to, "after:0", 5);
  const Tensor ints = make_tensor(DType::Int32, {8}, from, to, 0);
  if (me_ == from) {
    rdv->send(early, ints);
    rdv->send(after, ints);
  }
  if (me_ == to) {
    rdv->recv(after, kWait);  // so "early" has arrived before its recv
    Pending late;
    rdv->recv_async_expecting(early, {DType::Float32, Shape{8}}, late.callback());
    ASSERT_TRUE(late.wait());
    ASSERT_FALSE(late.error) << message_of(late.error);
    expect_same(late.value, ints, "a tensor that came before its recv");
  }
  sync();
  rdv->cleanup_step(5);
}

}  // namespace
}  // namespace weft
