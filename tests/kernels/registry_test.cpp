#include <gtest/gtest.h>

#include "kernels/register_all.h"
#include "runtime/op_registry.h"

namespace weft {
TEST(Registry, KnowsAdd) {
  register_builtin_ops();
  EXPECT_NE(op_registry().find("Add"), nullptr);
  EXPECT_THROW(op_registry().get("Addd"), NotFound);
}
}  // namespace weft
