// How the MPI progress engine carries messages of any length to a listener without probing for
// each: the listener keeps one receive of kFrameBytes posted (a standing receive is tested in the
// same MPI_Testsome as every other request, where a probe costs an MPI call of its own each
// round). A message travels as a frame on its tag: its total length (8 bytes), then as much of it
// as fits; what does not fit follows as one message on the continuation tag, received straight
// into the message's buffer once the frame has said how long it is (and the listener has
// checked that length against its limit, before allocating anything).
//
// What a longer message than announced does. Open MPI 4.1 does not honour truncation on its
// single-copy (CMA) path: a message longer than the receive posted for it, above the eager limit
// (4 KiB), is read with process_vm_readv for its whole length into the receive's buffer
// (AddressSanitizer saw it write past an 8 KiB frame). So:
// - the standing frame receive's buffer ends where its mapping ends, an inaccessible page after
//   it (MpiProgressEngine::Impl::GuardedFrame): a longer frame's read fails at the guard ("Read
//   -1, expected N, errno = 14" on stderr), MPI completes the receive as an error, and the
//   listener reports a damaged frame naming the sender. (With XPMEM as the single-copy mechanism,
//   which copies in user space, the copy would fault at the guard instead: a crash, never an
//   overwrite. The distributions' Open MPI uses CMA.)
// - a continuation, whose length the frame announced, is received only after MPI_Improbe has
//   shown it has exactly that length (probed only while one is awaited); another length is taken
//   into nothing and reported;
// - rendezvous payloads are received the same way (MpiProgressEngine::irecv_probed), and tensor
//   headers and start-up device reports by probe_listen.
// Taking a message "into nothing" is a receive into a null buffer of no bytes: there Open MPI's
// single-copy read fails too (the same line on stderr) and the receive completes as an error,
// writing nothing.
//
// Why not probe frames too: an MPI_Improbe per round in place of the standing receive made the
// cluster's null step about half again as slow here (24 -> 37 us, bench_distributed, 4 ranks on 2
// cores). Not the probe's own cost (~100 ns idle; two more idle probes per round changed nothing);
// the cause was not found. The guard page costs nothing per round or per message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace weft::mpi_frame {

inline constexpr size_t kFrameBytes = size_t{8} << 10;
inline constexpr size_t kLengthBytes = sizeof(uint64_t);
inline constexpr size_t kInlineBytes = kFrameBytes - kLengthBytes;  // message bytes in the frame
// The tag of a message's continuation: its tag plus this (control tags are small).
inline constexpr int kContinuationTagOffset = 1 << 14;

// What a received frame says: the message's length and how much of it the frame holds. An
// `error` (damaged frame, over the limit) leaves the rest meaningless.
struct FrameInfo {
  uint64_t length = 0;
  size_t inline_bytes = 0;  // in the frame, after the length
  bool continued = false;   // the rest comes on the continuation tag
  std::string error;
};

// Reads a frame of `received` bytes whose first 8 bytes hold `length`; `max_bytes` is the
// listener's limit.
inline FrameInfo read_frame(size_t received, uint64_t length, size_t max_bytes) {
  FrameInfo f;
  f.length = length;
  if (received < kLengthBytes) {
    f.error = "a frame of " + std::to_string(received) + " bytes, shorter than its length field";
    return f;
  }
  if (length > max_bytes) {
    f.error = "a message of " + std::to_string(length) + " bytes, over the limit of " + std::to_string(max_bytes);
    f.continued = length > kInlineBytes;
    return f;
  }
  f.continued = length > kInlineBytes;
  f.inline_bytes = f.continued ? kInlineBytes : static_cast<size_t>(length);
  if (received != kLengthBytes + f.inline_bytes)
    f.error = "a frame of " + std::to_string(received) + " bytes for a message of " + std::to_string(length) +
              " (expected " + std::to_string(kLengthBytes + f.inline_bytes) + ")";
  return f;
}

}  // namespace weft::mpi_frame
