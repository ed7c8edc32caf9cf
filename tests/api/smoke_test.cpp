#include <gtest/gtest.h>

#include <weft/weft.h>

namespace weft {
TEST(Smoke, AddOne) {
  auto y = constant({1.f, 2.f, 3.f}) + 1;
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4}));
}
}  // namespace weft
