// Gradients of the reductions: finite differences in float64 over every axis form, plus exact
// expectations for max/min ties (shared equally, as in TensorFlow).
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

Tensor f64(const Shape& s, int64_t seed) { return random::uniform(s, -1, 1, seed, float64); }

using Reduction = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool, const SourceLocation&);

struct Named {
  const char* name;
  Reduction fn;
};

const Named kReductions[] = {{"reduce_sum", reduce_sum},
                             {"reduce_mean", reduce_mean},
                             {"reduce_max", reduce_max},
                             {"reduce_min", reduce_min}};

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};

std::string describe(const char* op, const AxesCase& c, bool keepdims) {
  std::string s = std::string(op) + " shape " + c.shape.to_string() + " axes {";
  for (size_t i = 0; i < c.axes.size(); ++i) s += (i ? "," : "") + std::to_string(c.axes[i]);
  return s + "} keepdims " + (keepdims ? "true" : "false");
}

TEST(ReduceGradients, FiniteDifferencesOverEveryAxisForm) {
  const AxesCase cases[] = {
      {{5}, {}},          {{3, 4}, {}},        {{3, 4}, {0}},     {{3, 4}, {1}},       {{3, 4}, {-1}},
      {{3, 4}, {-2}},     {{3, 4}, {0, 1}},    {{2, 3, 4}, {}},   {{2, 3, 4}, {1}},    {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {-1}},  {{2, 3, 4}, {-3, -1}}, {{2, 3, 4}, {2, 0, 1}},
  };
  int64_t seed = 10;
  for (const Named& r : kReductions)
    for (const AxesCase& c : cases)
      for (bool keepdims : {false, true}) {
        std::vector<int64_t> axes = c.axes;
        Reduction fn = r.fn;
        expect_gradients_match([&](auto& x) { return fn(x[0], axes, keepdims, SourceLocation::current()); },
                               {f64(c.shape, ++seed)}, 1e-6, 1e-6, describe(r.name, c, keepdims));
      }
}

// The analytic gradient of a reduction of a plain sum, independent of the weighting in
// gradient_check.h: sum and mean are exact constants per element.
TEST(ReduceGradients, SumAndMeanSpreadTheIncomingGradient) {
  Tensor x = f64({2, 3, 4}, 1);
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = reduce_sum(reduce_sum(x, {1}) * 3.0);
    Tensor g = tape.gradient(y, x);
    ASSERT_EQ(g.shape(), x.shape());
    for (double v : g.to_vector<double>()) EXPECT_DOUBLE_EQ(v, 3.0);
  }
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = reduce_sum(reduce_mean(x, {0, 2}, /*keepdims=*/true));
    Tensor g = tape.gradient(y, x);
    ASSERT_EQ(g.shape(), x.shape());
    for (double v : g.to_vector<double>()) EXPECT_DOUBLE_EQ(v, 1.0 / 8.0);
  }
  {
    GradientTape tape;
    tape.watch(x);
    Tensor g = tape.gradient(reduce_mean(x), x);
    for (double v : g.to_vector<double>()) EXPECT_DOUBLE_EQ(v, 1.0 / 24.0);
  }
}

TEST(ReduceGradients, MaxTiesShareTheGradientEqually) {
  Tensor x = constant({1.0, 3.0, 3.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  EXPECT_EQ(tape.gradient(reduce_max(x), x).to_vector<double>(), (std::vector<double>{0, 0.5, 0.5}));
  EXPECT_EQ(tape.gradient(reduce_min(x), x).to_vector<double>(), (std::vector<double>{1, 0, 0}));
  Tensor all_equal = constant({2.0, 2.0, 2.0, 2.0});
  tape.watch(all_equal);
  EXPECT_EQ(tape.gradient(reduce_max(all_equal) * 2.0, all_equal).to_vector<double>(),
            (std::vector<double>{0.5, 0.5, 0.5, 0.5}));
}

TEST(ReduceGradients, TiesPerRowAlongAnAxis) {
  // Row 0 ties on its max twice, row 1 has one max, column-wise ties in the min.
  Tensor x = constant({{5.0, 1.0, 5.0}, {0.0, 7.0, 1.0}});
  Tensor w = constant({2.0, 10.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor g = tape.gradient(reduce_sum(reduce_max(x, {-1}) * w), x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 0, 1, 0, 10, 0}));
  Tensor gk = tape.gradient(reduce_sum(reduce_max(x, {1}, /*keepdims=*/true)), x);
  EXPECT_EQ(gk.shape(), x.shape());
  EXPECT_EQ(gk.to_vector<double>(), (std::vector<double>{0.5, 0, 0.5, 0, 1, 0}));
  Tensor y = constant({{1.0, 4.0}, {1.0, 2.0}, {3.0, 2.0}});
  tape.watch(y);
  Tensor gm = tape.gradient(reduce_sum(reduce_min(y, {0})), y);
  EXPECT_EQ(gm.to_vector<double>(), (std::vector<double>{0.5, 0, 0.5, 0.5, 0, 0.5}));
}

TEST(ReduceGradients, Float32GradientsKeepTheirDtype) {
  Tensor x = random::uniform({4, 3}, -1, 1, 3);
  for (const Named& r : kReductions) {
    GradientTape tape;
    tape.watch(x);
    Tensor g = tape.gradient(r.fn(x, {0}, false, SourceLocation::current()), x);
    EXPECT_EQ(g.dtype(), float32) << r.name;
    EXPECT_EQ(g.shape(), x.shape()) << r.name;
  }
}

}  // namespace
}  // namespace weft
