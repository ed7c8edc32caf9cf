// Error classes, codes and re-raising by code.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <typeinfo>

#include "runtime/error.h"

namespace weft {
namespace {

template <class E>
void expect_class(ErrorCode code, const char* name) {
  E e("boom");
  const Error& base = e;
  const std::runtime_error& std_base = e;
  EXPECT_EQ(base.code(), code) << name;
  EXPECT_STREQ(std_base.what(), "boom");
  EXPECT_STREQ(error_code_name(code), name);
  // throw_error must raise exactly this class with the same message.
  try {
    throw_error(code, std::string("again ") + name);
  } catch (const E& raised) {
    EXPECT_EQ(typeid(raised), typeid(E)) << name;
    EXPECT_EQ(raised.code(), code);
    EXPECT_EQ(std::string(raised.what()), std::string("again ") + name);
  } catch (...) {
    ADD_FAILURE() << "throw_error(" << name << ") raised another class";
  }
}

TEST(Error, ClassesCodesAndRoundTrip) {
  expect_class<InvalidArgument>(ErrorCode::kInvalidArgument, "InvalidArgument");
  expect_class<NotFound>(ErrorCode::kNotFound, "NotFound");
  expect_class<FailedPrecondition>(ErrorCode::kFailedPrecondition, "FailedPrecondition");
  expect_class<OutOfRange>(ErrorCode::kOutOfRange, "OutOfRange");
  expect_class<Unimplemented>(ErrorCode::kUnimplemented, "Unimplemented");
  expect_class<Unavailable>(ErrorCode::kUnavailable, "Unavailable");
  expect_class<DeadlineExceeded>(ErrorCode::kDeadlineExceeded, "DeadlineExceeded");
  expect_class<DataLoss>(ErrorCode::kDataLoss, "DataLoss");
  expect_class<Internal>(ErrorCode::kInternal, "Internal");
}

TEST(Error, CodesMatchTheCanonicalNumbers) {
  // Errors cross processes as (code, message); the numbers are the gRPC/TensorFlow ones.
  EXPECT_EQ(static_cast<int>(ErrorCode::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(ErrorCode::kDeadlineExceeded), 4);
  EXPECT_EQ(static_cast<int>(ErrorCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(ErrorCode::kFailedPrecondition), 9);
  EXPECT_EQ(static_cast<int>(ErrorCode::kOutOfRange), 11);
  EXPECT_EQ(static_cast<int>(ErrorCode::kUnimplemented), 12);
  EXPECT_EQ(static_cast<int>(ErrorCode::kInternal), 13);
  EXPECT_EQ(static_cast<int>(ErrorCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(ErrorCode::kDataLoss), 15);
}

TEST(Error, UnknownCodeBecomesInternal) {
  EXPECT_THROW(throw_error(static_cast<ErrorCode>(77), "from a newer peer"), Internal);
  EXPECT_STREQ(error_code_name(static_cast<ErrorCode>(77)), "Unknown");
}

TEST(Error, CatchableAsStdException) {
  try {
    throw_error(ErrorCode::kNotFound, "x");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "x");
    return;
  }
  ADD_FAILURE();
}

}  // namespace
}  // namespace weft
