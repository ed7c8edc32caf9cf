// Fuzz target for the MPI rendezvous's tensor header (comm/mpi_rendezvous_wire.h), which a peer
// sends before each tensor: any bytes must decode or raise InvalidArgument, never crash, and never
// promise a payload the decoder did not check. A header that decodes is canonical (encoding it
// gives back the same bytes) and its byte count is its shape times its dtype's size.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "comm/mpi_rendezvous_wire.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::mpi_wire;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  WireHeader h;
  try {
    h = decode_header(bytes, DecodeLimits{.max_header_bytes = 1 << 16, .tag_ub = 32767});
  } catch (const weft::InvalidArgument&) {
    return 0;
  }
  if (encode_header(h) != bytes) std::abort();
  const uint64_t expected = h.has_value ? static_cast<uint64_t>(h.shape.num_elements()) * weft::dtype_size(h.dtype) : 0;
  if (h.total_bytes != expected || h.chunk_bytes < 1 || chunk_count(h.total_bytes, h.chunk_bytes) > kMaxChunks)
    std::abort();
  if (h.tag < 1 || h.tag > 32767) std::abort();
  return 0;
}
