#include "comm/mpi_rendezvous_wire.h"

#include <algorithm>
#include <climits>

#include "runtime/error.h"

namespace weft::mpi_wire {

namespace {

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads fields off an untrusted buffer; running past its end is an error, never a read.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  uint64_t get(int bytes, const char* what) {
    need(static_cast<size_t>(bytes), what);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(b_[pos_ + i])} << (8 * i);
    pos_ += static_cast<size_t>(bytes);
    return v;
  }
  std::string_view take(size_t n, const char* what) {
    need(n, what);
    std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t left() const { return b_.size() - pos_; }

 private:
  void need(size_t n, const char* what) {
    if (n > left())
      throw InvalidArgument("header of " + std::to_string(b_.size()) + " bytes ends inside its " + what);
  }
  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

uint64_t chunk_bytes_for(uint64_t total_bytes, size_t max_message_bytes) {
  uint64_t chunk = std::clamp<uint64_t>(max_message_bytes, 1, INT_MAX);
  const uint64_t least = (total_bytes + kMaxChunks - 1) / kMaxChunks;  // so that chunks <= kMaxChunks
  return std::max(chunk, least);
}

uint64_t chunk_count(uint64_t total_bytes, uint64_t chunk_bytes) {
  return total_bytes == 0 ? 0 : (total_bytes - 1) / chunk_bytes + 1;
}

std::string encode_header(const WireHeader& h) {
  const std::string key = h.key.to_string();
  std::string out;
  out.reserve(64 + key.size() + 8 * static_cast<size_t>(h.shape.rank()));
  put(out, kMagic, 4);
  put(out, kVersion, 1);
  put(out, (h.is_dead ? 1u : 0u) | (h.has_value ? 2u : 0u) | (h.device ? 4u : 0u), 1);
  put(out, static_cast<uint8_t>(h.dtype), 1);
  put(out, static_cast<uint64_t>(h.shape.rank()), 1);
  put(out, key.size(), 4);
  out += key;
  for (int64_t d : h.shape) put(out, static_cast<uint64_t>(d), 8);
  put(out, h.total_bytes, 8);
  put(out, h.chunk_bytes, 8);
  put(out, h.tag, 4);
  if (h.device) {
    put(out, h.device->link.size(), 2);
    out += h.device->link;
    put(out, h.device->sequence, 8);
  }
  return out;
}

WireHeader decode_header(std::string_view bytes, const DecodeLimits& limits) {
  if (bytes.size() > limits.max_header_bytes)
    throw InvalidArgument("header of " + std::to_string(bytes.size()) + " bytes is over the limit of " +
                          std::to_string(limits.max_header_bytes));
  Reader r(bytes);
  if (r.get(4, "magic number") != kMagic) throw InvalidArgument("header does not start with the magic number");
  if (uint64_t v = r.get(1, "version"); v != kVersion)
    throw InvalidArgument("header has version " + std::to_string(v) + ", expected " + std::to_string(kVersion));
  WireHeader h;
  const uint64_t flags = r.get(1, "flags");
  if (flags & ~uint64_t{7}) throw InvalidArgument("header has unknown flags " + std::to_string(flags));
  h.is_dead = flags & 1;
  h.has_value = flags & 2;
  const uint64_t dtype = r.get(1, "dtype");
  if (dtype >= static_cast<uint64_t>(kNumDTypes))
    throw InvalidArgument("header has dtype " + std::to_string(dtype) + ", not a known dtype");
  h.dtype = static_cast<DType>(dtype);
  const uint64_t rank = r.get(1, "rank");
  if (rank > kMaxRank)
    throw InvalidArgument("header has rank " + std::to_string(rank) + ", over " + std::to_string(kMaxRank));
  const uint64_t key_len = r.get(4, "key length");
  h.key = RendezvousKey::parse(r.take(key_len, "key"));  // InvalidArgument naming the key
  for (uint64_t i = 0; i < rank; ++i) {
    const auto d = static_cast<int64_t>(r.get(8, "dims"));
    if (d < 0) throw InvalidArgument("header of key " + h.key.to_string() + " has a negative dim " + std::to_string(d));
    h.shape.push_back(d);
  }
  h.total_bytes = r.get(8, "byte count");
  h.chunk_bytes = r.get(8, "message size");
  const uint64_t tag = r.get(4, "tag");
  if (flags & 4) {
    DevicePayloadTicket ticket;
    const uint64_t link_len = r.get(2, "device link length");
    ticket.link = std::string(r.take(link_len, "device link"));
    ticket.sequence = r.get(8, "device sequence number");
    if (ticket.link.empty() || ticket.link.size() > kMaxDeviceLinkBytes)
      throw InvalidArgument("header of key " + h.key.to_string() + " names a device link of " +
                            std::to_string(ticket.link.size()) + " bytes (1 to " + std::to_string(kMaxDeviceLinkBytes) +
                            " allowed)");
    h.device = std::move(ticket);
  }
  if (r.left() != 0)
    throw InvalidArgument("header of key " + h.key.to_string() + " has " + std::to_string(r.left()) +
                          " bytes after its end");
  const std::string of = " in the header of key " + h.key.to_string();
  int64_t elements = 0;
  try {
    elements = h.shape.num_elements();  // InvalidArgument when the product overflows
  } catch (const InvalidArgument&) {
    throw InvalidArgument("shape " + h.shape.to_string() + " has too many elements" + of);
  }
  uint64_t expected = 0;
  if (h.has_value && __builtin_mul_overflow(static_cast<uint64_t>(elements), dtype_size(h.dtype), &expected))
    throw InvalidArgument("shape " + h.shape.to_string() + " is too large" + of);
  if (h.total_bytes != expected)
    throw InvalidArgument("byte count " + std::to_string(h.total_bytes) + " is not " + std::to_string(expected) +
                          (h.has_value ? " (" + h.shape.to_string() + " of " + std::string(dtype_name(h.dtype)) + ")"
                                       : " (no tensor)") +
                          of);
  if (h.chunk_bytes < 1 || h.chunk_bytes > INT_MAX)
    throw InvalidArgument("message size " + std::to_string(h.chunk_bytes) + " is outside 1 to 2^31 - 1" + of);
  if (chunk_count(h.total_bytes, h.chunk_bytes) > kMaxChunks)
    throw InvalidArgument("payload of " + std::to_string(h.total_bytes) + " bytes in messages of " +
                          std::to_string(h.chunk_bytes) + " takes more than " + std::to_string(kMaxChunks) +
                          " messages" + of);
  if (tag < 1 || tag > static_cast<uint64_t>(limits.tag_ub))
    throw InvalidArgument("payload tag " + std::to_string(tag) + " is outside 1 to " +
                          std::to_string(limits.tag_ub) + of);
  h.tag = static_cast<uint32_t>(tag);
  if (h.device && h.total_bytes == 0)
    throw InvalidArgument("a payload of no bytes cannot travel by the device transport" + of);
  return h;
}

}  // namespace weft::mpi_wire
