// The header message of the MPI rendezvous (comm/mpi_rendezvous.h): what a sender announces
// before a tensor's payload, encoded little-endian whatever the host, and decoded as untrusted
// input (every field checked; InvalidArgument saying what is wrong). Separate from the transport
// so that tests can build damaged headers field by field.
//
//   std::string bytes = encode_header(h);            // sender
//   WireHeader got = decode_header(bytes, limits);   // receiver; throws InvalidArgument
//
// Layout: magic "WRDV" (u32), version (u8), flags (u8: 1 = dead, 2 = has a tensor, 4 = the payload
// travels by the device transport), dtype (u8), rank (u8), key length (u32), the key's canonical
// string, rank dims (i64 each), total payload bytes (u64), bytes per payload message (u64),
// payload tag (u32); with flag 4, the device transport's ticket: link length (u16), the link's
// bytes, sequence number (u64). Nothing may follow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "comm/device_payloads.h"
#include "runtime/dtype.h"
#include "runtime/rendezvous.h"
#include "runtime/shape.h"

namespace weft::mpi_wire {

inline constexpr uint32_t kMagic = 0x56445257;  // "WRDV" read little-endian
inline constexpr uint8_t kVersion = 1;
// A payload may be split into at most this many messages: bounds the requests a header can make
// the receiver post.
inline constexpr uint64_t kMaxChunks = uint64_t{1} << 16;
inline constexpr int kMaxRank = 64;

struct WireHeader {
  RendezvousKey key;
  bool is_dead = false;
  bool has_value = true;  // false for a dead tensor sent without a value
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t total_bytes = 0;
  uint64_t chunk_bytes = 1;  // bytes per payload message but the last (1 to 2^31 - 1)
  uint32_t tag = 0;          // the payload's tag (1 to the tag bound)
  // Set when the payload travels by the device transport (comm/device_payloads.h) instead of MPI
  // messages under `tag`: only for a tensor with bytes.
  std::optional<DevicePayloadTicket> device;
};

struct DecodeLimits {
  size_t max_header_bytes = size_t{1} << 16;
  int tag_ub = 32767;  // MPI_TAG_UB of the communicator
};

// Bytes per payload message for `total_bytes` under `max_message_bytes`: at most 2^31 - 1 (MPI's
// count is an int) and few enough that the payload takes at most kMaxChunks messages.
uint64_t chunk_bytes_for(uint64_t total_bytes, size_t max_message_bytes);
// Number of payload messages (0 for an empty payload).
uint64_t chunk_count(uint64_t total_bytes, uint64_t chunk_bytes);

std::string encode_header(const WireHeader& h);
// InvalidArgument("... <what is wrong>") for anything but a header encode_header could have made
// within `limits`.
WireHeader decode_header(std::string_view bytes, const DecodeLimits& limits);

}  // namespace weft::mpi_wire
