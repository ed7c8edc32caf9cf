// Operators and plain C++ numbers: x + 1, 2.f * x, 1 - x, x / 2, x > 0, and numbers that the
// tensor's dtype cannot hold.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference.h"

namespace weft {
namespace {

TEST(ScalarOperators, FloatTensorWithNumbersOnEitherSide) {
  const std::vector<float> xs = {-2.f, 0.f, 1.5f, 3.f};
  Tensor x = constant(xs, Shape{4});
  auto each = [&](const Tensor& t, auto f) {
    ASSERT_EQ(t.dtype(), float32);
    ASSERT_EQ(t.shape(), Shape{4});
    std::vector<float> got = t.to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], f(xs[i])) << "x = " << xs[i];
  };
  each(x + 1, [](float v) { return v + 1.f; });
  each(1 + x, [](float v) { return 1.f + v; });
  each(2.f * x, [](float v) { return 2.f * v; });
  each(x * 2.0, [](float v) { return v * 2.f; });
  each(1 - x, [](float v) { return 1.f - v; });
  each(x - 1, [](float v) { return v - 1.f; });
  each(x / 2, [](float v) { return v / 2.f; });
  each(3 / (x + 5), [](float v) { return 3.f / (v + 5.f); });
  each(-x, [](float v) { return -v; });
  each(x + x * x, [](float v) { return v + v * v; });
  each(maximum(x, 0.f), [](float v) { return v > 0 ? v : 0.f; });
  each(minimum(1, x), [](float v) { return v < 1 ? v : 1.f; });
  each(pow(x, 2), [](float v) { return v * v; });
}

TEST(ScalarOperators, ComparisonsWithNumbers) {
  Tensor x = constant({-2, 0, 5});
  EXPECT_EQ((x > 0).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((x >= 0).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((0 < x).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((x <= -2).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(equal(x, 5).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(not_equal(0, x).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(equal(constant({true, false}), true).to_vector<bool>(), (std::vector<bool>{true, false}));
  Tensor y = constant({0.5, 1.5});
  EXPECT_EQ((y < 1).to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST(ScalarOperators, NumberTakesTheTensorsDType) {
  EXPECT_EQ((constant({1, 2}) + 1).dtype(), int32);
  EXPECT_EQ((constant(std::vector<int64_t>{1, 2}) * 3).dtype(), int64);
  EXPECT_EQ((constant({1.0, 2.0}) + 1.f).dtype(), float64);
  EXPECT_EQ((constant({1.f}) + 1.0).dtype(), float32);
  EXPECT_EQ((constant({7, -7}) / 2).to_vector<int32_t>(), (std::vector<int32_t>{3, -4}));
  EXPECT_EQ((constant({1, 2}) + 2.0).to_vector<int32_t>(), (std::vector<int32_t>{3, 4}));  // 2.0 is an int
  EXPECT_EQ((constant(std::vector<int64_t>{0}, Shape{1}) + 4611686018427387904.0).item<int64_t>(),
            int64_t{1} << 62);
}

TEST(ScalarOperators, NumbersTheDTypeCannotHold) {
  Tensor i32 = constant({1, 2, 3});
  for (auto f : std::vector<std::function<Tensor()>>{
           [&] { return i32 + 1.5; }, [&] { return 0.5 * i32; }, [&] { return i32 - (int64_t{1} << 40); },
           [&] { return i32 / 1e10; }, [&] { return i32 > 0.1f; }, [&] { return maximum(i32, NAN); },
           [&] { return add(i32, INFINITY); }}) {
    std::string msg = ref::error_message<InvalidArgument>(f);
    EXPECT_TRUE(ref::contains(msg, "int32")) << msg;
    EXPECT_TRUE(ref::contains(msg, "cannot be represented")) << msg;
  }
  EXPECT_TRUE(ref::contains(ref::error_message<InvalidArgument>([&] { (void)(i32 + 1.5); }), "[add]"));
  EXPECT_TRUE(ref::contains(ref::error_message<InvalidArgument>([&] { (void)(2.5 * i32); }), "[mul]"));
  // 2^63 is one past int64's range; as a double it compares <= INT64_MAX after rounding.
  Tensor i64 = constant(std::vector<int64_t>{1}, Shape{1});
  EXPECT_THROW((void)(i64 + 9223372036854775808.0), InvalidArgument);
  EXPECT_THROW((void)(i64 + -9223372036854777856.0), InvalidArgument);
  EXPECT_EQ((i64 + -9223372036854775808.0).item<int64_t>(), std::numeric_limits<int64_t>::min() + 1);
  EXPECT_THROW((void)(i64 + std::numeric_limits<uint64_t>::max()), InvalidArgument);
}

TEST(ScalarOperators, EmptyHandleNamesTheOp) {
  Tensor empty;
  std::string msg = ref::error_message<InvalidArgument>([&] { (void)(empty + 1); });
  EXPECT_TRUE(ref::contains(msg, "[add]") && ref::contains(msg, "empty")) << msg;
  msg = ref::error_message<InvalidArgument>([&] { (void)(2.f * empty); });
  EXPECT_TRUE(ref::contains(msg, "[mul]") && ref::contains(msg, "empty")) << msg;
}

}  // namespace
}  // namespace weft
