// Eager against traced, bit for bit, for the reduce, nn and creation families: every reduction
// (argmax included) over every axis set with and without keepdims, softmax and log_softmax along
// each axis, both losses, and the ops that make tensors (fill, zeros, ones and their _like forms,
// range, constant, one_hot, seeded random draws). The elementwise activations run with the other
// elementwise ops (eager_vs_traced_elementwise_test.cpp).
#include <gtest/gtest-spi.h>

#include "eager_vs_traced.h"

namespace weft {
namespace {

using namespace eager_vs_traced;

struct ReduceCase {
  const char* name;
  const char* node;
  Tensor (*fn)(const Tensor&, const std::vector<int64_t>&, bool);
  bool needs_elements;  // max and min have no identity: no reducing over an empty axis
};
// Names the case in test listings (else gtest prints its bytes, pointers included).
void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

const ReduceCase kReduce[] = {
    {"reduce_sum", "Sum", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return reduce_sum(x, a, k); },
     false},
    {"reduce_mean", "Mean", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return reduce_mean(x, a, k); },
     false},
    {"reduce_max", "Max", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return reduce_max(x, a, k); },
     true},
    {"reduce_min", "Min", [](const Tensor& x, const std::vector<int64_t>& a, bool k) { return reduce_min(x, a, k); },
     true},
};

std::string axes_string(const std::vector<int64_t>& axes) {
  std::string s = "axes [";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

// Shapes with the axis sets worth reducing them over: everything, each single axis (negative too),
// pairs, inner and outer runs, and sizes large enough for the kernels to split their work.
struct ReduceShape {
  Shape shape;
  std::vector<std::vector<int64_t>> axes;
};

const std::vector<ReduceShape>& reduce_shapes() {
  static const std::vector<ReduceShape> shapes = {
      {{}, {{}}},
      {{7}, {{}, {0}, {-1}}},
      {{33, 17}, {{}, {0}, {1}, {-1, 0}}},
      {{4, 5, 6}, {{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}}},
      {{2, 3, 1, 4, 2}, {{1, 3}, {-2}, {2}}},
      {{2, 0, 3}, {{}, {1}, {0, 2}}},
      {{1 << 20}, {{}}},
      {{1024, 1024}, {{0}, {1}}},
      {{3, 100000}, {{0}, {1}}},
  };
  return shapes;
}

bool reduces_an_empty_axis(const Shape& s, const std::vector<int64_t>& axes) {
  for (int64_t i = 0; i < s.rank(); ++i) {
    bool reduced = axes.empty();
    for (int64_t a : axes) reduced |= (a < 0 ? a + s.rank() : a) == i;
    if (reduced && s[i] == 0) return true;
  }
  return false;
}

class EagerVsTracedReduce : public testing::TestWithParam<ReduceCase> {};

TEST_P(EagerVsTracedReduce, EveryDTypeAxesAndKeepdims) {
  const ReduceCase& c = GetParam();
  const std::vector<DType> dtypes = dtypes_with_kernel(c.node);
  ASSERT_FALSE(dtypes.empty()) << "no CPU kernel of " << c.node;
  uint32_t seed = 1;
  for (DType d : dtypes) {
    for (const ReduceShape& rs : reduce_shapes()) {
      // The extremes among the values make integer sums wrap around, in any order of summing.
      Tensor x = sample(d, rs.shape, seed++, -1000, 1000);
      for (const std::vector<int64_t>& axes : rs.axes) {
        if (c.needs_elements && reduces_an_empty_axis(rs.shape, axes)) continue;
        for (bool keepdims : {false, true}) {
          Op op = [&](const std::vector<Tensor>& in) { return c.fn(in[0], axes, keepdims); };
          expect_traced_equals_eager(op, {x}, c.node,
                                     describe(c.name, d, {rs.shape}) + " " + axes_string(axes) +
                                         (keepdims ? " keepdims" : ""));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, EagerVsTracedReduce, testing::ValuesIn(kReduce),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EagerVsTraced, ArgmaxEveryDTypeAndAxis) {
  const std::vector<DType> dtypes = dtypes_with_kernel("ArgMax");
  ASSERT_FALSE(dtypes.empty());
  uint32_t seed = 1;
  for (DType d : dtypes) {
    for (const ReduceShape& rs : reduce_shapes()) {
      // Few distinct values, so that ties (the first index wins) are common.
      Tensor x = sample(d, rs.shape, seed++, -3, 3);
      for (int64_t axis = -rs.shape.rank(); axis < rs.shape.rank(); ++axis) {
        if (rs.shape[axis < 0 ? axis + rs.shape.rank() : axis] == 0) continue;
        Op op = [axis](const std::vector<Tensor>& in) { return argmax(in[0], axis); };
        expect_traced_equals_eager(op, {x}, "ArgMax",
                                   describe("argmax", d, {rs.shape}) + " axis " + std::to_string(axis));
      }
    }
  }
}

// Relu, Sigmoid and Tanh, elementwise, run with the other elementwise ops
// (eager_vs_traced_elementwise_test.cpp).

TEST(EagerVsTraced, SoftmaxAndLogSoftmaxEveryAxis) {
  for (const char* node : {"Softmax", "LogSoftmax"}) {
    const std::vector<DType> dtypes = dtypes_with_kernel(node);
    ASSERT_FALSE(dtypes.empty()) << node;
    uint32_t seed = 1;
    for (DType d : dtypes) {
      for (const Shape& s : {Shape{7}, Shape{33, 17}, Shape{4, 5, 6}, Shape{2, 0, 3}, Shape{3, 1}, Shape{4, 100000}}) {
        // With specials: a row holding an infinity or a NaN must come out the same way in both.
        Tensor x = sample(d, s, seed++, -20, 20);
        for (int64_t axis = -s.rank(); axis < s.rank(); ++axis) {
          Op op = [node, axis](const std::vector<Tensor>& in) {
            return std::string(node) == "Softmax" ? softmax(in[0], axis) : log_softmax(in[0], axis);
          };
          expect_traced_equals_eager(op, {x}, node, describe(node, d, {s}) + " axis " + std::to_string(axis));
        }
      }
    }
  }
}

TEST(EagerVsTraced, SparseSoftmaxCrossEntropyEveryDTypeAndLabelType) {
  const std::vector<DType> dtypes = dtypes_with_kernel("SparseSoftmaxCrossEntropyWithLogits");
  ASSERT_FALSE(dtypes.empty());
  Op op = [](const std::vector<Tensor>& in) { return nn::sparse_softmax_cross_entropy(in[0], in[1]); };
  uint32_t seed = 1;
  for (DType d : dtypes)
    for (DType label : {int32, int64, uint8})
      for (const Shape& s : {Shape{1, 3}, Shape{8, 10}, Shape{64, 1000}, Shape{5000, 7}}) {
        Tensor labels = sample(label, {s[0]}, seed++, 0, static_cast<double>(s[1] - 1), false);
        Tensor logits = sample(d, s, seed++, -10, 10, false);
        expect_traced_equals_eager(op, {labels, logits}, "SparseSoftmaxCrossEntropyWithLogits",
                                   describe("sparse_softmax_cross_entropy", d, {s}) + " labels " +
                                       std::string(dtype_name(label)));
      }
}

// mean_squared_error is a composite (sub, square, reduce_mean): the pass pipeline may fuse its
// elementwise part, and a fused kernel must still round like the separate ops.
TEST(EagerVsTraced, MeanSquaredErrorEveryDTypeAndBroadcast) {
  Op op = [](const std::vector<Tensor>& in) { return nn::mean_squared_error(in[0], in[1]); };
  uint32_t seed = 1;
  for (DType d : {float32, float64})
    for (const auto& [st, sp] : std::vector<std::pair<Shape, Shape>>{{{7}, {7}},
                                                                     {{33, 17}, {33, 17}},
                                                                     {{17}, {33, 17}},
                                                                     {{33, 1}, {33, 17}},
                                                                     {{}, {4, 5}},
                                                                     {{1 << 18}, {1 << 18}}})
      expect_traced_equals_eager(op, {sample(d, st, seed++, -5, 5, false), sample(d, sp, seed++, -5, 5, false)}, "",
                                 describe("mean_squared_error", d, {st, sp}));
}

const std::vector<Shape>& creation_shapes() {
  static const std::vector<Shape> shapes = {{}, {1}, {7}, {33, 17}, {2, 0, 3}, {1 << 18}};
  return shapes;
}

TEST(EagerVsTraced, FillZerosOnesEveryDType) {
  ASSERT_EQ(dtypes_with_kernel("Fill").size(), std::size(kAllDTypes));
  uint32_t seed = 1;
  for (DType d : kAllDTypes) {
    for (const Shape& s : creation_shapes()) {
      const std::string what = describe("", d, {s});
      // The value as an input: a Fill node of the trace, fed at run time.
      Op fill_op = [&s](const std::vector<Tensor>& in) { return fill(s, in[0]); };
      expect_traced_equals_eager(fill_op, {sample(d, {}, seed++, -100, 100, false)}, "Fill", "fill" + what);
      expect_traced_equals_eager([&](const std::vector<Tensor>&) { return zeros(s, d); }, {}, "Fill", "zeros" + what);
      expect_traced_equals_eager([&](const std::vector<Tensor>&) { return ones(s, d); }, {}, "Fill", "ones" + what);
      Tensor like = sample(d, s, seed++, -100, 100);
      expect_traced_equals_eager([](const std::vector<Tensor>& in) { return zeros_like(in[0]); }, {like}, "Fill",
                                 "zeros_like" + what);
      expect_traced_equals_eager([](const std::vector<Tensor>& in) { return ones_like(in[0]); }, {like}, "Fill",
                                 "ones_like" + what);
    }
  }
}

TEST(EagerVsTraced, RangeEveryDType) {
  const std::vector<DType> dtypes = dtypes_with_kernel("Range");
  ASSERT_FALSE(dtypes.empty());
  struct Args {
    double start, limit, delta;
  };
  // Counts that round up, negative steps, empty ranges, and a fractional step long enough for
  // start + i * delta and repeated addition to part ways.
  const Args args[] = {{0, 10, 1}, {3, -7, -2}, {5, 5, 1}, {-4, 9, 3}, {0, 1, 0.1}, {0, 1000, 0.001}, {1e6, -1e6, -7}};
  for (DType d : dtypes)
    for (const Args& a : args) {
      const bool integer = d == int32 || d == int64;
      if (integer && (a.start != std::floor(a.start) || a.delta != std::floor(a.delta))) continue;
      Op op = [&](const std::vector<Tensor>&) { return range_of(d, a.start, a.limit, a.delta); };
      expect_traced_equals_eager(op, {}, "Range",
                                 "range " + std::string(dtype_name(d)) + " " + std::to_string(a.start) + ", " +
                                     std::to_string(a.limit) + ", " + std::to_string(a.delta));
    }
}

// A constant made inside the body is a Const node of the trace (captured, not fed).
TEST(EagerVsTraced, ConstantEveryDType) {
  uint32_t seed = 1;
  for (DType d : kAllDTypes)
    for (const Shape& s : creation_shapes()) {
      Tensor value = sample(d, s, seed++, -100, 100);
      std::vector<unsigned char> bytes(value.nbytes());
      if (!bytes.empty()) value.copy_to_host(bytes.data());
      Op op = [&](const std::vector<Tensor>&) { return constant_from_host(d, bytes.data(), s.num_elements(), s); };
      expect_traced_equals_eager(op, {}, "Const", describe("constant", d, {s}));
    }
}

TEST(EagerVsTraced, OneHotEveryIndexDType) {
  const std::vector<DType> dtypes = dtypes_with_kernel("OneHot");
  ASSERT_FALSE(dtypes.empty());
  uint32_t seed = 1;
  for (DType d : dtypes)
    for (int64_t depth : {1, 4, 10, 1000})
      for (const Shape& s : {Shape{}, Shape{7}, Shape{5, 3}, Shape{0}, Shape{2000}}) {
        // Indices outside [0, depth) on both sides give rows of zeros.
        Tensor indices = sample(d, s, seed++, -2, static_cast<double>(depth + 1), false);
        Op op = [depth](const std::vector<Tensor>& in) { return one_hot(in[0], depth); };
        expect_traced_equals_eager(op, {indices}, "OneHot",
                                   describe("one_hot", d, {s}) + " depth " + std::to_string(depth));
      }
}

// An explicit seed gives the same numbers in every mode (api/ops/random.h).
TEST(EagerVsTraced, SeededRandomEveryDType) {
  const std::vector<DType> normal_dtypes = dtypes_with_kernel("RandomNormal");
  const std::vector<DType> uniform_dtypes = dtypes_with_kernel("RandomUniform");
  ASSERT_FALSE(normal_dtypes.empty());
  ASSERT_FALSE(uniform_dtypes.empty());
  for (const Shape& s : creation_shapes()) {
    for (int64_t seed : {int64_t{0}, int64_t{1}, int64_t{12345}, int64_t{1} << 40}) {
      for (DType d : normal_dtypes)
        expect_traced_equals_eager([&](const std::vector<Tensor>&) { return random::normal(s, 0.5, 2.0, seed, d); }, {},
                                   "RandomNormal", describe("random::normal seed " + std::to_string(seed), d, {s}));
      for (DType d : uniform_dtypes) {
        expect_traced_equals_eager([&](const std::vector<Tensor>&) { return random::uniform(s, -3, 7, seed, d); }, {},
                                   "RandomUniform", describe("random::uniform seed " + std::to_string(seed), d, {s}));
        Tensor like = zeros(s, float32);
        expect_traced_equals_eager(
            [&](const std::vector<Tensor>& in) { return random::uniform_like(in[0], -3, 7, seed, d); }, {like},
            "RandomUniform", describe("random::uniform_like seed " + std::to_string(seed), d, {s}));
      }
    }
  }
}

// The messages of the failures f reports, which do not fail this test.
template <class F>
std::vector<std::string> failures_of(F&& f) {
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::vector<std::string> messages;
  for (int i = 0; i < results.size(); ++i) messages.push_back(results.GetTestPartResult(i).message());
  return messages;
}

// The check itself can fail: a body that, only when traced, multiplies by 1 + 2^-23 (one ulp
// for most float32 values) is caught in every trace, and one whose op never reaches the graph
// (an eager result captured as a constant) is caught too.
TEST(EagerVsTraced, TheCheckCatchesOneUlpAndAMissingNode) {
  Tensor x = sample(float32, {100}, 1, 1, 2, false);
  Op off_by_an_ulp = [](const std::vector<Tensor>& in) {
    return in[0].is_symbolic() ? in[0] * (1.f + 0x1p-23f) : in[0] * 1.f;
  };
  std::vector<std::string> f = failures_of([&] { expect_traced_equals_eager(off_by_an_ulp, {x}, "Mul", "x * 1"); });
  // Three traces here, and two more on each GPU present.
  ASSERT_EQ(f.size(), 3u + 2u * gpu_device_names().size());
  EXPECT_TRUE(ref::contains(f[0], "x * 1, traced without passes: element 0 of 100 is ")) << f[0];
  EXPECT_TRUE(ref::contains(f[1], "x * 1, traced and optimised: element 0 of 100 is ")) << f[1];
  EXPECT_TRUE(ref::contains(f[2], "x * 1, traced with unknown dims: element 0 of 100 is ")) << f[2];

  Tensor eager_result = exp(x);
  Op captured = [&](const std::vector<Tensor>&) { return eager_result; };
  f = failures_of([&] { expect_traced_equals_eager(captured, {}, "Exp", "exp"); });
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(ref::contains(f[0], "exp: no Exp node traced")) << f[0];
}

}  // namespace
}  // namespace weft
