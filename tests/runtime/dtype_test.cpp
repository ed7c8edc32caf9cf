// DType names, sizes, parsing and the C++ type mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/dtype.h"

namespace weft {
namespace {

struct DTypeFacts {
  DType dtype;
  const char* name;
  size_t size;
  bool floating;
  bool integer;
};

// Written out by hand so that a reordered enum or name table shows up here.
constexpr DTypeFacts kFacts[] = {
    {float16, "float16", 2, true, false}, {bfloat16, "bfloat16", 2, true, false},
    {float32, "float32", 4, true, false}, {float64, "float64", 8, true, false},
    {int8, "int8", 1, false, true},       {uint8, "uint8", 1, false, true},
    {int32, "int32", 4, false, true},     {int64, "int64", 8, false, true},
    {bool_, "bool", 1, false, false},
};

TEST(DType, NamesSizesAndKinds) {
  static_assert(std::size(kFacts) == kNumDTypes);
  for (const auto& f : kFacts) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(dtype_name(f.dtype), f.name);
    EXPECT_EQ(dtype_size(f.dtype), f.size);
    EXPECT_EQ(is_floating(f.dtype), f.floating);
    EXPECT_EQ(is_integer(f.dtype), f.integer);
  }
}

TEST(DType, ParseRoundTrip) {
  for (const auto& f : kFacts) {
    DType parsed = DType::Bool;
    if (f.dtype == DType::Bool) parsed = DType::Float32;  // make sure parse actually writes
    ASSERT_TRUE(parse_dtype(f.name, &parsed)) << f.name;
    EXPECT_EQ(parsed, f.dtype);
  }
}

TEST(DType, ParseRejectsUnknownNamesAndLeavesOutputAlone) {
  for (const char* bad : {"", "float", "Float32", "float32 ", "int", "double", "half", "bool_"}) {
    DType out = DType::Int8;
    EXPECT_FALSE(parse_dtype(bad, &out)) << "'" << bad << "'";
    EXPECT_EQ(out, DType::Int8);
  }
}

TEST(DType, InvalidEnumValueHasAName) { EXPECT_EQ(dtype_name(static_cast<DType>(200)), "invalid"); }

TEST(DType, CppTypeMapping) {
  static_assert(dtype_v<Half> == float16);
  static_assert(dtype_v<BFloat16> == bfloat16);
  static_assert(dtype_v<float> == float32);
  static_assert(dtype_v<const double> == float64);
  static_assert(dtype_v<int8_t> == int8);
  static_assert(dtype_v<uint8_t> == uint8);
  static_assert(dtype_v<int32_t> == int32);
  static_assert(dtype_v<int64_t> == int64);
  static_assert(dtype_v<bool> == bool_);
  // visit_dtype must hand each dtype the C++ type of the same size and mapping.
  for (const auto& f : kFacts) {
    visit_dtype(f.dtype, [&](auto v) {
      using T = decltype(v);
      EXPECT_EQ(sizeof(T), f.size) << f.name;
      EXPECT_EQ(dtype_v<T>, f.dtype) << f.name;
    });
  }
}

}  // namespace
}  // namespace weft
