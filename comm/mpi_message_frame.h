// How the MPI progress engine carries messages of any length to a listener without probing:
// the listener keeps one receive of kFrameBytes posted (a standing receive is tested in the same
// MPI_Testsome as every other request, where a probe would cost a progress call of its own each
// round). A message travels as a frame on its tag: its total length (8 bytes), then as much of it
// as fits; what does not fit follows as one message on the continuation tag, received straight
// into the message's buffer once the frame has said how long it is (and the listener has
// checked that length against its limit, before allocating anything).
//
// A known hole: Open MPI 4.1 does not honour truncation on its single-copy (CMA) path. A message
// longer than the receive posted for it, above the eager limit (4 KiB), is written past the end of
// the receive's buffer (AddressSanitizer saw it: process_vm_readv into an 8 KiB frame). So a peer
// that sends a frame longer than kFrameBytes, or a rendezvous payload longer than its header
// announced, can overwrite memory here; a well-formed sender never does (SECURITY.md: peers are
// trusted). Where a length is not known for sure it is probed before the receive (the engine's
// probe_listen, for the rendezvous's tensor headers; start-up's device reports); frames and
// payloads keep their fixed receives, the fast path. A refused message's
// continuation is taken into a null buffer of no bytes: there Open MPI's single-copy read fails
// ("Read -1, expected N, errno = 14" on stderr) and the receive completes as an error, writing
// nothing.
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
