#include "runtime/dtype.h"

namespace weft {

namespace {
constexpr std::string_view kNames[kNumDTypes] = {"float16", "bfloat16", "float32", "float64", "int8",
                                                  "uint8",   "int32",    "int64",   "bool"};
}

std::string_view dtype_name(DType dtype) {
  auto i = static_cast<size_t>(dtype);
  return i < kNumDTypes ? kNames[i] : std::string_view("invalid");
}

bool parse_dtype(std::string_view name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kNames[i] == name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace weft
