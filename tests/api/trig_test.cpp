// sin and cos: against float64 libm, 16-bit as float32 rounded once, eager against traced bit for
// bit, finite-difference gradients (first and second order), and the dtypes they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eager_vs_traced.h"
#include "gradient_check.h"

namespace weft {
namespace {

using namespace eager_vs_traced;

using UnaryFn = Tensor (*)(const Tensor&, const SourceLocation&);

struct Trig {
  const char* name;
  const char* node;
  UnaryFn fn;
  double (*exact)(double);
};
void PrintTo(const Trig& c, std::ostream* os) { *os << c.name; }

const Trig kTrig[] = {
    {"sin", "Sin", sin, [](double x) { return std::sin(x); }},
    {"cos", "Cos", cos, [](double x) { return std::cos(x); }},
};

class TrigOp : public ::testing::TestWithParam<Trig> {};

// Within two ulps of the float64 result rounded to T (libm's float functions are faithful; the
// float64 reference is closer than either), NaN where it is NaN (infinities, NaN).
template <class T>
void expect_near_libm(const Trig& c) {
  uint32_t seed = 7;
  for (const Shape& s : ref::unary_cases()) {
    SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype_v<T>)) + " " + s.to_string());
    const Tensor x = sample(dtype_v<T>, s, seed++, -20, 20);
    const std::vector<T> in = x.to_vector<T>();
    const Tensor y = c.fn(x, SourceLocation::current());
    const std::vector<T> got = y.to_vector<T>();
    ASSERT_EQ(got.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = static_cast<double>(static_cast<T>(c.exact(static_cast<double>(in[i]))));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << c.name << "(" << in[i] << ") = " << got[i];
        continue;
      }
      const double ulp = std::numeric_limits<T>::epsilon() * std::max(std::abs(want), 1e-30);
      ASSERT_NEAR(static_cast<double>(got[i]), want, 2 * ulp) << c.name << "(" << in[i] << ")";
    }
  }
}

TEST_P(TrigOp, MatchesLibmInFloat64) {
  expect_near_libm<float>(GetParam());
  expect_near_libm<double>(GetParam());
}

TEST_P(TrigOp, KnownValues) {
  const Trig& c = GetParam();
  const double pi = 3.14159265358979323846;
  const std::vector<double> x = {0.0, pi / 6, pi / 2, pi, 1.5 * pi, -pi / 3};
  const std::vector<double> got = c.fn(constant(x), SourceLocation::current()).to_vector<double>();
  const std::vector<double> want = std::string(c.name) == "sin"
                                       ? std::vector<double>{0, 0.5, 1, 0, -1, -std::sqrt(3.0) / 2}
                                       : std::vector<double>{1, std::sqrt(3.0) / 2, 0, -1, 0, 0.5};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << c.name << "(" << x[i] << ")";
}

TEST_P(TrigOp, SixteenBitIsFloat32RoundedOnce) {
  const Trig& c = GetParam();
  for (DType dt : {float16, bfloat16}) {
    uint32_t seed = 30;
    for (const Shape& s : ref::unary_cases()) {
      const Tensor x = sample(dt, s, seed++, -10, 10);
      expect_same_bits(cast(c.fn(cast(x, float32), SourceLocation::current()), dt), c.fn(x, SourceLocation::current()),
                       describe(c.name, dt, {s}));
    }
  }
}

TEST_P(TrigOp, EagerEqualsTracedForEveryDTypeAndShape) {
  const Trig& c = GetParam();
  const std::vector<DType> dtypes = dtypes_with_kernel(c.node);
  ASSERT_EQ(dtypes.size(), 4u) << "float16, bfloat16, float32 and float64";
  Op op = [&c](const std::vector<Tensor>& in) { return c.fn(in[0], SourceLocation::current()); };
  uint32_t seed = 50;
  for (DType d : dtypes)
    for (const Shape& s : ref::unary_cases())
      expect_traced_equals_eager(op, {sample(d, s, seed++, -100, 100)}, c.node, describe(c.name, d, {s}));
}

TEST_P(TrigOp, GradientsMatchFiniteDifferences) {
  const Trig& c = GetParam();
  const Tensor x = random::uniform({3, 5}, -4, 4, 11, float64);
  testing::expect_gradients_match([&c](const std::vector<Tensor>& in) { return c.fn(in[0], SourceLocation::current()); },
                                  {x}, 1e-6, 1e-6, c.name);
  // The gradient is itself differentiable (it is built from sin and cos of the input).
  testing::expect_gradients_match(
      [&c](const std::vector<Tensor>& in) {
        GradientTape tape;
        tape.watch(in[0]);
        Tensor y = reduce_sum(c.fn(in[0], SourceLocation::current()));
        return tape.gradient(y, in[0]);
      },
      {x}, 1e-6, 1e-6, std::string(c.name) + "'");
}

TEST_P(TrigOp, RefusesIntegers) {
  const Trig& c = GetParam();
  const std::string message =
      ref::error_message<InvalidArgument>([&] { c.fn(constant({1, 2}), SourceLocation::current()); });
  EXPECT_NE(message.find(std::string("[") + c.name + "]"), std::string::npos) << message;
  EXPECT_NE(message.find("int32"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Ops, TrigOp, ::testing::ValuesIn(kTrig), [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace weft
