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
// The id's format (encode_nccl_id, decode_nccl_id, nccl_compiled_in) is runtime/collectives.h's,
// where kernels validate the attribute; making one (new_nccl_id) needs NCCL and lives here.
#pragma once

#include <string>

#include "runtime/collectives.h"

namespace weft {

// A fresh id from ncclGetUniqueId, hex-encoded. FailedPrecondition without NCCL; Unavailable
// when NCCL cannot make one (no network interface it can use, ...).
std::string new_nccl_id();

}  // namespace weft
