// Errors across processes: a weft::Error travels as (code, message) in a control message and is
// raised again on the chief as the same class, its message naming the task it came from.
#pragma once

#include <exception>
#include <string>

#include "cluster/proto/control.capnp.h"

namespace weft {

// Writes the error held by `error` (a weft::Error, or anything else as Internal).
void error_to_proto(const std::exception_ptr& error, proto::ErrorInfo::Builder out);
// The error as its own class; its message starts with "[task NAME] " unless it names the task
// already. An unknown code (a damaged or newer message) is Internal.
std::exception_ptr error_from_proto(proto::ErrorInfo::Reader in, const std::string& task);
// Prefixes the message of `error` with "[task NAME] ", keeping its class.
std::exception_ptr error_at_task(const std::exception_ptr& error, const std::string& task);

}  // namespace weft
