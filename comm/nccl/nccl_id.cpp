#include "comm/nccl/nccl_id.h"

#include "runtime/dtype.h"
#include "runtime/error.h"

#ifdef WEFT_WITH_NCCL
#include <nccl.h>
static_assert(NCCL_UNIQUE_ID_BYTES == weft::kNcclIdBytes, "ncclUniqueId's size changed");
#endif

namespace weft {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string encode_nccl_id(const NcclIdBytes& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kNcclIdBytes);
  for (uint8_t b : id) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

NcclIdBytes decode_nccl_id(std::string_view hex, std::string_view op) {
  const std::string where = "[" + std::string(op) + "] ";
  if (hex.size() != 2 * kNcclIdBytes)
    throw InvalidArgument(where + "nccl_id must be " + std::to_string(2 * kNcclIdBytes) + " hex digits (NCCL's " +
                          std::to_string(kNcclIdBytes) + "-byte unique id), got " + std::to_string(hex.size()) +
                          " characters");
  NcclIdBytes id{};
  for (size_t i = 0; i < kNcclIdBytes; ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      const size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      throw InvalidArgument(where + "nccl_id must be hex digits; character " + std::to_string(at) + " is '" +
                            std::string(1, hex[at]) + "'");
    }
    id[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

bool nccl_dtype_supported(DType dtype) { return dtype != DType::Bool; }

#ifdef WEFT_WITH_NCCL

bool nccl_compiled_in() { return true; }

std::string new_nccl_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    throw Unavailable(std::string("[nccl] ncclGetUniqueId failed: ") + ncclGetErrorString(r) + " (" +
                      ncclGetLastError(nullptr) + ")");
  NcclIdBytes bytes;
  static_assert(sizeof(id.internal) == kNcclIdBytes);
  for (size_t i = 0; i < kNcclIdBytes; ++i) bytes[i] = static_cast<uint8_t>(id.internal[i]);
  return encode_nccl_id(bytes);
}

#else

bool nccl_compiled_in() { return false; }

std::string new_nccl_id() {
  throw FailedPrecondition("[nccl] weft was built without CUDA, so without NCCL: no NCCL id can be made");
}

#endif

}  // namespace weft
