// The error classes of weft. Every failure a user can cause surfaces as one of these, with a
// message that starts with the op in brackets: "[matmul] inner dimensions differ: (2, 3) x (4, 5)".
#pragma once

#include <stdexcept>
#include <string>

namespace weft {

enum class ErrorCode {
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define WEFT_DEFINE_ERROR(Name, Code)                                              \
  class Name : public Error {                                                     \
   public:                                                                        \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {} \
  };
WEFT_DEFINE_ERROR(InvalidArgument, kInvalidArgument)
WEFT_DEFINE_ERROR(NotFound, kNotFound)
WEFT_DEFINE_ERROR(FailedPrecondition, kFailedPrecondition)
WEFT_DEFINE_ERROR(OutOfRange, kOutOfRange)
WEFT_DEFINE_ERROR(Unimplemented, kUnimplemented)
WEFT_DEFINE_ERROR(Unavailable, kUnavailable)
WEFT_DEFINE_ERROR(DeadlineExceeded, kDeadlineExceeded)
WEFT_DEFINE_ERROR(DataLoss, kDataLoss)
WEFT_DEFINE_ERROR(Internal, kInternal)
#undef WEFT_DEFINE_ERROR

// Raises the subclass that matches `code`; used to re-raise an error that crossed a process.
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

}  // namespace weft
