#include "comm/nccl/nccl_id.h"

#include "runtime/dtype.h"
#include "runtime/error.h"

#ifdef WEFT_WITH_NCCL
#include <nccl.h>
static_assert(NCCL_UNIQUE_ID_BYTES == weft::kNcclIdBytes, "ncclUniqueId's size changed");
#endif

namespace weft {

#ifdef WEFT_WITH_NCCL

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

std::string new_nccl_id() {
  throw FailedPrecondition("[nccl] weft was built without CUDA, so without NCCL: no NCCL id can be made");
}

#endif

}  // namespace weft
