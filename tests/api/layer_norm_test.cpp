// layer_norm (the LayerNorm and LayerNormGrad ops): values, mean and rstd against the formula in
// float64 (several shapes, the last axis and several trailing axes, odd sizes, rows of length 1,
// rows long enough for the gradient's second path, rows far from zero), gradients against the
// formula and by finite differences (float64), second-order gradients, eager against traced,
// float16 / bfloat16 against float32, and the InvalidArgument of each bad argument.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "eager_vs_traced.h"
#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

using testing::expect_gradients_match;

struct Case {
  Shape shape;
  int64_t axis;
};

// Odd sizes, one and several normalised axes, rows of one element, a single row, no rows, and
// rows longer than the CPU gradient's fused column sums take (2048).
const Case kCases[] = {{{4, 7}, -1}, {{2, 3, 5}, -1}, {{2, 3, 5}, 1},  {{2, 3, 5}, -2}, {{6, 1}, -1},
                       {{1, 9}, -1}, {{9}, 0},        {{2, 3, 5}, 0}, {{3, 2500}, -1}, {{0, 4}, -1}};
// Small enough for finite differences.
const Case kGradientCases[] = {{{3, 5}, -1}, {{2, 3, 4}, 1}, {{4, 1}, -1}, {{7}, 0}};

int64_t first_axis(const Case& c) { return c.axis < 0 ? c.axis + c.shape.rank() : c.axis; }
Shape normalised_shape(const Case& c) {
  Shape s;
  for (int64_t i = first_axis(c); i < c.shape.rank(); ++i) s.push_back(c.shape[i]);
  return s;
}
std::string describe(const Case& c) { return c.shape.to_string() + " axis " + std::to_string(c.axis); }

Tensor u64(const Shape& s, int64_t seed, double lo, double hi) { return random::uniform(s, lo, hi, seed, float64); }

// All three outputs of LayerNorm: y, mean, rstd.
std::vector<Tensor> layer_norm_outputs(const Tensor& x, const Tensor& g, const Tensor& b, int64_t axis, double eps) {
  return dispatch(op_def("LayerNorm"), std::vector<Tensor>{x, g, b}, {{"axis", axis}, {"epsilon", eps}});
}

// The formula, x viewed as rows of n: mean and biased variance in two passes, in long double (a
// plain sum of 1000 values around 1e8 would lose the digits the op is tested to keep).
struct Reference {
  std::vector<double> y, mean, rstd;
};
Reference reference(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b, double eps) {
  using L = long double;
  const size_t n = g.size(), rows = n ? x.size() / n : 0;
  Reference r;
  for (size_t i = 0; i < rows; ++i) {
    L mean = 0, var = 0;
    for (size_t j = 0; j < n; ++j) mean += x[i * n + j];
    mean /= static_cast<L>(n);
    for (size_t j = 0; j < n; ++j) var += (x[i * n + j] - mean) * (x[i * n + j] - mean);
    var /= static_cast<L>(n);
    const L rstd = 1 / std::sqrt(var + eps);
    r.mean.push_back(static_cast<double>(mean));
    r.rstd.push_back(static_cast<double>(rstd));
    for (size_t j = 0; j < n; ++j) r.y.push_back(static_cast<double>((x[i * n + j] - mean) * rstd * g[j] + b[j]));
  }
  return r;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

TEST(LayerNorm, MatchesTheFormula) {
  int64_t seed = 1;
  for (const Case& c : kCases) {
    const Shape ns = normalised_shape(c);
    const Tensor x = u64(c.shape, seed++, -3, 5), g = u64(ns, seed++, 0.5, 2), b = u64(ns, seed++, -1, 1);
    const double eps = 1e-3;
    const std::vector<Tensor> out = layer_norm_outputs(x, g, b, c.axis, eps);
    const Reference want = reference(x.to_vector<double>(), g.to_vector<double>(), b.to_vector<double>(), eps);
    ASSERT_EQ(out[0].shape(), c.shape) << describe(c);
    Shape rows;
    for (int64_t i = 0; i < first_axis(c); ++i) rows.push_back(c.shape[i]);
    ASSERT_EQ(out[1].shape(), rows) << describe(c);
    ASSERT_EQ(out[2].shape(), rows) << describe(c);
    expect_near_all(out[0].to_vector<double>(), want.y, 1e-12, "y " + describe(c));
    expect_near_all(out[1].to_vector<double>(), want.mean, 1e-12, "mean " + describe(c));
    expect_near_all(out[2].to_vector<double>(), want.rstd, 1e-12, "rstd " + describe(c));
    // The front-end returns y; float32 gives the same within float32's precision.
    expect_near_all(layer_norm(x, g, b, c.axis, eps).to_vector<double>(), want.y, 1e-12, "front-end " + describe(c));
    const Tensor y32 = layer_norm(cast(x, float32), cast(g, float32), cast(b, float32), c.axis, eps);
    ASSERT_EQ(y32.dtype(), float32);
    expect_near_all(cast(y32, float64).to_vector<double>(), want.y, 2e-6, "float32 " + describe(c));
  }
}

TEST(LayerNorm, DefaultsAreTheLastAxisAndEpsilon1e5) {
  const Tensor x = u64({3, 4}, 5, -1, 1), g = u64({4}, 6, 0.5, 2), b = u64({4}, 7, -1, 1);
  const Reference want = reference(x.to_vector<double>(), g.to_vector<double>(), b.to_vector<double>(), 1e-5);
  expect_near_all(layer_norm(x, g, b).to_vector<double>(), want.y, 1e-12, "defaults");
}

// One pass over the row is sound far from zero: the statistics are sums of x - (the row's first
// value), so a mean of 1e4 (float32) or 1e8 (float64) beside a standard deviation of about 0.6
// costs no accuracy; nor does rounding the mean to float32 before normalising.
TEST(LayerNorm, RowsFarFromZeroKeepTheirPrecision) {
  for (double offset : {1e4, -3e4}) {
    const Tensor x = cast(add(u64({5, 300}, 11, -1, 1), offset), float32);
    const Tensor g = ones({300}), b = zeros({300});
    const Reference want =
        reference(cast(x, float64).to_vector<double>(), std::vector<double>(300, 1.0), std::vector<double>(300, 0.0), 1e-5);
    const std::vector<Tensor> out = layer_norm_outputs(x, g, b, -1, 1e-5);
    expect_near_all(cast(out[0], float64).to_vector<double>(), want.y, 4e-6, "float32 y, offset " + std::to_string(offset));
    expect_near_all(cast(out[2], float64).to_vector<double>(), want.rstd, 1e-6, "float32 rstd");
  }
  const Tensor x = add(u64({4, 1000}, 12, -1, 1), 1e8);
  const Reference want = reference(x.to_vector<double>(), std::vector<double>(1000, 1.0), std::vector<double>(1000, 0.0), 1e-5);
  expect_near_all(layer_norm(x, ones({1000}, float64), zeros({1000}, float64)).to_vector<double>(), want.y, 1e-7,
                  "float64 around 1e8");
}

TEST(LayerNorm, EmptyRowsHaveNoStatistics) {
  const std::vector<Tensor> out = layer_norm_outputs(zeros({3, 0}), zeros({0}), zeros({0}), -1, 1e-5);
  EXPECT_EQ(out[0].shape(), (Shape{3, 0}));
  for (float m : out[1].to_vector<float>()) EXPECT_TRUE(std::isnan(m));
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma; dgamma = sum(dy * xhat),
// dbeta = sum(dy) over the rows; in plain loops, for every case (the long rows take the CPU
// gradient's second path).
TEST(LayerNormGradients, MatchTheFormula) {
  int64_t seed = 30;
  for (const Case& c : kCases) {
    const Shape ns = normalised_shape(c);
    const Tensor x = u64(c.shape, seed++, -2, 2), g = u64(ns, seed++, 0.5, 2), b = u64(ns, seed++, -1, 1);
    const Tensor dy = u64(c.shape, seed++, -1, 1);
    GradientTape tape;
    tape.watch(x);
    tape.watch(g);
    tape.watch(b);
    const Tensor y = layer_norm(x, g, b, c.axis, 1e-3);
    const std::vector<Tensor> d = tape.gradient(reduce_sum(mul(y, dy)), std::vector<Tensor>{x, g, b});
    const std::vector<double> xv = x.to_vector<double>(), gv = g.to_vector<double>(), dyv = dy.to_vector<double>();
    const Reference r = reference(xv, gv, b.to_vector<double>(), 1e-3);
    const size_t n = gv.size(), rows = n ? xv.size() / n : 0;
    std::vector<double> dx(xv.size()), dgamma(n, 0.0), dbeta(n, 0.0);
    for (size_t i = 0; i < rows; ++i) {
      double mg = 0, mgx = 0;
      for (size_t j = 0; j < n; ++j) {
        const double xh = (xv[i * n + j] - r.mean[i]) * r.rstd[i];
        mg += dyv[i * n + j] * gv[j] / static_cast<double>(n);
        mgx += dyv[i * n + j] * gv[j] * xh / static_cast<double>(n);
        dgamma[j] += dyv[i * n + j] * xh;
        dbeta[j] += dyv[i * n + j];
      }
      for (size_t j = 0; j < n; ++j) {
        const double xh = (xv[i * n + j] - r.mean[i]) * r.rstd[i];
        dx[i * n + j] = r.rstd[i] * (dyv[i * n + j] * gv[j] - mg - xh * mgx);
      }
    }
    expect_near_all(d[0].to_vector<double>(), dx, 1e-11, "dx " + describe(c));
    expect_near_all(d[1].to_vector<double>(), dgamma, 1e-11, "dgamma " + describe(c));
    expect_near_all(d[2].to_vector<double>(), dbeta, 1e-11, "dbeta " + describe(c));
  }
}

TEST(LayerNormGradients, FiniteDifferences) {
  int64_t seed = 60;
  for (const Case& c : kGradientCases) {
    const Shape ns = normalised_shape(c);
    const int64_t axis = c.axis;
    expect_gradients_match([axis](auto& in) { return layer_norm(in[0], in[1], in[2], axis, 1e-3); },
                           {u64(c.shape, seed, -2, 2), u64(ns, seed + 1, 0.5, 2), u64(ns, seed + 2, -1, 1)}, 1e-6,
                           1e-5, describe(c));
    seed += 3;
  }
}

// The gradient's gradient (LayerNormGrad's, composed of front-end ops): d/d(x, gamma, u) of
// grad_{x or gamma} sum(layer_norm(x) * u).
TEST(LayerNormGradients, SecondOrder) {
  int64_t seed = 80;
  for (const Case& c : kGradientCases) {
    const Shape ns = normalised_shape(c);
    const Tensor x = u64(c.shape, seed++, -2, 2), gamma = u64(ns, seed++, 0.5, 2), beta = u64(ns, seed++, -1, 1);
    const Tensor u = u64(c.shape, seed++, -1, 1);
    for (int wrt : {0, 1}) {
      const int64_t axis = c.axis;
      expect_gradients_match(
          [&, axis](auto& in) {
            GradientTape tape;
            tape.watch(in[0]);
            tape.watch(in[1]);
            const Tensor y = layer_norm(in[0], in[1], beta, axis, 1e-3);
            return tape.gradient(reduce_sum(mul(y, in[2])), std::vector<Tensor>{in[0], in[1]})[wrt];
          },
          {x, gamma, u}, 1e-6, 1e-5, std::string("second order") + (wrt ? " dgamma " : " dx ") + describe(c));
    }
  }
}

TEST(LayerNorm, EagerEqualsTraced) {
  using namespace eager_vs_traced;
  uint32_t seed = 100;
  for (DType d : dtypes_with_kernel("LayerNorm"))
    for (const Case& c : {Case{{4, 7}, -1}, Case{{2, 3, 5}, 1}, Case{{6, 1}, -1}, Case{{3, 2500}, -1}}) {
      const Shape ns = normalised_shape(c);
      const DType p = d == float64 ? float64 : float32;
      const Tensor x = sample(d, c.shape, seed++, -3, 3, false);
      const Tensor g = cast(random::uniform(ns, 0.5, 2, seed++, float64), p);
      const Tensor b = cast(random::uniform(ns, -1, 1, seed++, float64), p);
      const std::string what = std::string(dtype_name(d)) + " " + describe(c);
      const int64_t axis = c.axis;
      expect_traced_equals_eager([axis](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], axis); },
                                 {x, g, b}, "LayerNorm", what);
      for (int wrt : {0, 1})
        expect_traced_equals_eager(
            [axis, wrt](const std::vector<Tensor>& in) {
              GradientTape tape;
              tape.watch(in[0]);
              tape.watch(in[1]);
              const Tensor y = layer_norm(in[0], in[1], in[2], axis);
              const Tensor y32 = cast(y, float32);
              return tape.gradient(reduce_sum(mul(y32, y32)), std::vector<Tensor>{in[0], in[1]})[wrt];
            },
            {x, g, b}, "LayerNormGrad", (wrt ? "dgamma " : "dx ") + what);
    }
}

// 16-bit x is widened exactly, normalised in float32 and rounded once: the float32 result
// rounded; its statistics and parameter gradients are float32's.
TEST(LayerNorm, HalfTypesMatchFloat32) {
  for (DType d : {float16, bfloat16})
    for (const Case& c : {Case{{4, 7}, -1}, Case{{2, 3, 5}, 1}, Case{{3, 2500}, -1}}) {
      const Shape ns = normalised_shape(c);
      const Tensor x = cast(random::uniform(c.shape, -3, 3, 3, float32), d);
      const Tensor g = random::uniform(ns, 0.5, 2, 4, float32), b = random::uniform(ns, -1, 1, 5, float32);
      const std::string what = std::string(dtype_name(d)) + " " + describe(c);
      const std::vector<Tensor> got = layer_norm_outputs(x, g, b, c.axis, 1e-5);
      const std::vector<Tensor> want = layer_norm_outputs(cast(x, float32), g, b, c.axis, 1e-5);
      ASSERT_EQ(got[0].dtype(), d) << what;
      ASSERT_EQ(got[1].dtype(), float32) << what;
      EXPECT_EQ(cast(got[0], float32).to_vector<float>(), cast(cast(want[0], d), float32).to_vector<float>()) << what;
      EXPECT_EQ(got[1].to_vector<float>(), want[1].to_vector<float>()) << what;
      EXPECT_EQ(got[2].to_vector<float>(), want[2].to_vector<float>()) << what;
      // The gradient op itself, given the same (exactly widened) dy: dx is float32's rounded once,
      // dgamma and dbeta float32's.
      const Tensor dy = cast(random::uniform(c.shape, -1, 1, 6, float32), d);
      const Attrs attrs{{"axis", c.axis}, {"epsilon", 1e-5}};
      const std::vector<Tensor> gh =
          dispatch(op_def("LayerNormGrad"), std::vector<Tensor>{dy, x, g, got[1], got[2]}, attrs);
      const std::vector<Tensor> gf = dispatch(
          op_def("LayerNormGrad"), std::vector<Tensor>{cast(dy, float32), cast(x, float32), g, got[1], got[2]}, attrs);
      ASSERT_EQ(gh[0].dtype(), d) << what;
      EXPECT_EQ(cast(gh[0], float32).to_vector<float>(), cast(cast(gf[0], d), float32).to_vector<float>()) << what;
      EXPECT_EQ(gh[1].to_vector<float>(), gf[1].to_vector<float>()) << what;
      EXPECT_EQ(gh[2].to_vector<float>(), gf[2].to_vector<float>()) << what;
      // The second order runs in float32 and rounds back too.
      GradientTape outer;
      outer.watch(x);
      Tensor dx;
      {
        GradientTape inner;
        inner.watch(x);
        const Tensor y = cast(layer_norm(x, g, b, c.axis), float32);
        dx = inner.gradient(reduce_sum(mul(y, y)), x);
      }
      const Tensor ddx = outer.gradient(reduce_sum(cast(dx, float32)), x);
      EXPECT_EQ(ddx.dtype(), d) << what;
      EXPECT_EQ(ddx.shape(), c.shape) << what;
    }
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument";
  return "";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(message.find(p), std::string::npos) << "\"" << p << "\" not in: " << message;
}

TEST(LayerNorm, BadArgumentsAreInvalidArgument) {
  const Tensor x = zeros({2, 3}), g = ones({3}), b = zeros({3});
  expect_mentions(error_of([&] { layer_norm(x, ones({4}), b); }), {"[layer_norm]", "gamma", "(4,)", "(2, 3)", "axis -1"});
  expect_mentions(error_of([&] { layer_norm(x, g, zeros({2, 3})); }), {"[layer_norm]", "beta", "(2, 3)", "(3,)"});
  expect_mentions(error_of([&] { layer_norm(zeros({2, 3, 5}), ones({5}), zeros({5}), 1); }),
                  {"[layer_norm]", "gamma", "(3, 5)", "(5,)", "axis 1"});
  expect_mentions(error_of([&] { layer_norm(x, ones({3}, float64), b); }), {"[layer_norm]", "gamma", "float32", "float64"});
  expect_mentions(error_of([&] { layer_norm(cast(x, bfloat16), cast(g, bfloat16), b); }),
                  {"[layer_norm]", "gamma", "float32", "bfloat16"});
  expect_mentions(error_of([&] { layer_norm(x, g, b, 2); }), {"[layer_norm]", "axis 2", "(2, 3)", "rank 2"});
  expect_mentions(error_of([&] { layer_norm(x, g, b, -3); }), {"[layer_norm]", "axis -3", "(2, 3)"});
  expect_mentions(error_of([&] { layer_norm(constant(1.f), ones({1}), zeros({1})); }), {"[layer_norm]", "axis", "scalar"});
  for (double eps : {0.0, -1e-5, static_cast<double>(INFINITY), static_cast<double>(NAN)})
    expect_mentions(error_of([&] { layer_norm(x, g, b, -1, eps); }), {"[layer_norm]", "epsilon", "(2, 3)"});
  expect_mentions(error_of([&] { layer_norm(zeros({2, 3}, int32), g, b); }), {"[layer_norm]", "int32"});
  expect_mentions(error_of([&] { layer_norm(x, Tensor(), b); }), {"[layer_norm]", "gamma"});
  // The gradient op checks its inputs the same way.
  expect_mentions(error_of([&] {
                    dispatch(op_def("LayerNormGrad"), std::vector<Tensor>{zeros({2, 4}), x, g, zeros({2}), ones({2})},
                             {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
                  }),
                  {"[layer_norm_grad]", "dy", "(2, 4)", "(2, 3)"});
  expect_mentions(error_of([&] {
                    dispatch(op_def("LayerNormGrad"), std::vector<Tensor>{x, x, g, zeros({3}), ones({2})},
                             {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
                  }),
                  {"[layer_norm_grad]", "mean", "(2,)", "(3,)"});
}

// In a traced function and in a TF1 graph the same checks run while the graph is built, before
// any kernel.
TEST(LayerNorm, BadArgumentsFailWhileTracing) {
  auto f = function([](Tensor x) { return layer_norm(x, ones({4}), zeros({4})); });
  expect_mentions(error_of([&] { f(zeros({2, 3})); }), {"[layer_norm]", "gamma", "(4,)"});
  Graph g;
  GraphScope scope(g);
  const Tensor x = placeholder(float32, {-1, 3}, "x");
  expect_mentions(error_of([&] { layer_norm(x, ones({3}), zeros({3}), -1, 0.0); }), {"[layer_norm]", "epsilon"});
  // Unknown dims are accepted where the known ones agree.
  EXPECT_EQ(layer_norm(x, ones({3}), zeros({3})).shape(), (Shape{-1, 3}));
}

}  // namespace
}  // namespace weft
