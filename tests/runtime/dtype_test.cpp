#include <gtest/gtest.h>

#include "runtime/dtype.h"

namespace weft {
TEST(DType, Names) { EXPECT_EQ(dtype_name(float32), "float32"); }
}  // namespace weft
