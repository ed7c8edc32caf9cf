// The NCCL unique id of a communicator, as the "nccl_id" attribute of the collective ops carries it:
// NCCL's 128 opaque bytes, hex-encoded (256 lowercase or uppercase hex digits; attributes are strings).
//
// The chief (the process that builds the replicated graph) calls new_nccl_id() once per group and
// puts the result on every collective node of that group; the graph reaches every task, so the id
// needs no broadcast of its own. Each (group key, id) names one communicator (comm/nccl/
// nccl_collectives.h): after an abort the group runs again only under a fresh id. An id serves ONE
// communicator (NCCL's bootstrap root, started by ncclGetUniqueId, admits nranks ranks once), so
// every group needs an id of its own.
//
// Plain C++, built in every configuration: only nccl_compiled_in() and new_nccl_id() depend on
// whether weft was built with CUDA (and so NCCL).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft {

inline constexpr size_t kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclIdBytes = std::array<uint8_t, kNcclIdBytes>;

// 256 lowercase hex digits.
std::string encode_nccl_id(const NcclIdBytes& id);
// The bytes of a hex id; InvalidArgument "[op] ..." naming what is wrong (length, a non-hex digit).
NcclIdBytes decode_nccl_id(std::string_view hex, std::string_view op);

// Whether this build has NCCL (it does exactly when it has CUDA).
bool nccl_compiled_in();
// A fresh id from ncclGetUniqueId, hex-encoded. FailedPrecondition without NCCL; Unavailable
// when NCCL cannot make one (no network interface it can use, ...).
std::string new_nccl_id();

}  // namespace weft

namespace weft {
enum class DType : uint8_t;
// The dtypes NCCL has a type for (comm/nccl/nccl_dtype.h maps them): every weft dtype but bool.
bool nccl_dtype_supported(DType dtype);
}  // namespace weft
