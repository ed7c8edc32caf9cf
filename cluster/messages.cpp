#include "cluster/messages.h"

#include "runtime/error.h"

namespace weft {

namespace {

bool known_code(uint32_t code) {
  switch (static_cast<ErrorCode>(code)) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kDeadlineExceeded:
    case ErrorCode::kNotFound:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kOutOfRange:
    case ErrorCode::kUnimplemented:
    case ErrorCode::kInternal:
    case ErrorCode::kUnavailable:
    case ErrorCode::kDataLoss:
      return true;
  }
  return false;
}

std::exception_ptr make_error(ErrorCode code, const std::string& message) {
  try {
    throw_error(code, message);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

void error_to_proto(const std::exception_ptr& error, proto::ErrorInfo::Builder out) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    out.setCode(static_cast<uint32_t>(e.code()));
    out.setMessage(e.what());
  } catch (const std::exception& e) {
    out.setCode(static_cast<uint32_t>(ErrorCode::kInternal));
    out.setMessage(e.what());
  } catch (...) {
    out.setCode(static_cast<uint32_t>(ErrorCode::kInternal));
    out.setMessage("an exception that is not a std::exception");
  }
}

std::exception_ptr error_from_proto(proto::ErrorInfo::Reader in, const std::string& task) {
  std::string message = in.hasMessage() ? std::string(in.getMessage().cStr()) : std::string("(no message)");
  if (message.size() > 65536) message = message.substr(0, 65536) + "...";
  if (message.find(task) == std::string::npos) message = "[task " + task + "] " + message;
  if (!known_code(in.getCode()))
    return make_error(ErrorCode::kInternal, message + " (unknown error code " + std::to_string(in.getCode()) + ")");
  return make_error(static_cast<ErrorCode>(in.getCode()), message);
}

std::exception_ptr error_at_task(const std::exception_ptr& error, const std::string& task) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    const std::string what = e.what();
    return what.find("[task " + task + "]") == 0 ? error : make_error(e.code(), "[task " + task + "] " + what);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, "[task " + task + "] " + e.what());
  } catch (...) {
    return make_error(ErrorCode::kInternal, "[task " + task + "] unknown exception");
  }
}

}  // namespace weft
