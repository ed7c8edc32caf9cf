#include "runtime/error.h"

namespace weft {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kDeadlineExceeded: return "DeadlineExceeded";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kOutOfRange: return "OutOfRange";
    case ErrorCode::kUnimplemented: return "Unimplemented";
    case ErrorCode::kInternal: return "Internal";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kDataLoss: return "DataLoss";
  }
  return "Unknown";
}

void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kInvalidArgument: throw InvalidArgument(message);
    case ErrorCode::kDeadlineExceeded: throw DeadlineExceeded(message);
    case ErrorCode::kNotFound: throw NotFound(message);
    case ErrorCode::kFailedPrecondition: throw FailedPrecondition(message);
    case ErrorCode::kOutOfRange: throw OutOfRange(message);
    case ErrorCode::kUnimplemented: throw Unimplemented(message);
    case ErrorCode::kUnavailable: throw Unavailable(message);
    case ErrorCode::kDataLoss: throw DataLoss(message);
    case ErrorCode::kInternal: break;
  }
  throw Internal(message);
}

}  // namespace weft
