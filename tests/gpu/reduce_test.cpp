// The CUDA reductions (kernels/cuda/reduce.cu) against the CPU kernels of the same ops, on random
// data with special values, every path of the GPU side (warp rows, block rows, split rows,
// columns narrow and wide, split columns, separated reduced dims) and the edge cases (scalars,
// empty tensors, empty reductions). The registration test also runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

const char* const kReductions[] = {"Sum", "Mean", "Max", "Min"};
constexpr DType kCpuDtypes[] = {float32, float64, int32, int64};
constexpr DType kSixteenBit[] = {float16, bfloat16};

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;  // empty: all
  bool keepdims = false;
};

std::vector<ReduceCase> reduce_cases() {
  return {
      {Shape{1000}, {}},
      {Shape{}, {}},
      {Shape{1}, {0}},
      {Shape{3, 4, 5}, {1}},
      {Shape{3, 4, 5}, {1}, true},
      {Shape{3, 4, 5}, {0}},
      {Shape{3, 4, 5}, {2}},
      {Shape{3, 4, 5}, {-1, 0}},            // separated: the strided path
      {Shape{3, 4, 5}, {0, 2}, true},
      {Shape{2, 3, 4, 5, 6}, {0, 2, 4}},
      {Shape{64, 300, 40}, {0, 2}},
      {Shape{1, 5, 1}, {0, 2}},             // only size-1 dims: a copy
      {Shape{5, 1, 7}, {1}, true},
      {Shape{513, 1025}, {1}},              // block per row
      {Shape{4097, 100}, {1}},              // warp per row
      {Shape{100003, 3}, {1}},              // thread per row
      {Shape{5000, 8}, {-1}},
      {Shape{513, 1025}, {0}},              // columns
      {Shape{1000, 3}, {0}},                // narrow columns
      {Shape{(1 << 20) + 7}, {}},           // one long row, split in chunks
      {Shape{3, 300000}, {1}},              // a few long rows, split
      {Shape{1 << 16, 3}, {0}},             // tall and narrow columns, split
      {Shape{2, 100000, 70}, {1}},          // columns split, several outer rows
      {Shape{7, 0}, {0}},                   // empty output
      {Shape{0, 4}, {0}},                   // empty reduction: Sum 0, Mean NaN / 0
      {Shape{3, 0, 2}, {1}, true},
  };
}

std::string describe(const char* op, DType dt, const ReduceCase& c) {
  std::string s = std::string(op) + " " + std::string(dtype_name(dt)) + " " + c.shape.to_string() + " axes [";
  for (int64_t a : c.axes) s += std::to_string(a) + " ";
  return s + "]" + (c.keepdims ? " keepdims" : "");
}

Shape reduced_shape(const ReduceCase& c) {
  const int64_t r = c.shape.rank();
  std::vector<char> mask(static_cast<size_t>(r), c.axes.empty() ? 1 : 0);
  for (int64_t a : c.axes) mask[a < 0 ? a + r : a] = 1;
  std::vector<int64_t> out;
  for (int64_t d = 0; d < r; ++d)
    if (!mask[d]) out.push_back(c.shape[d]);
    else if (c.keepdims) out.push_back(1);
  return Shape(out);
}

Attrs reduce_attrs(const ReduceCase& c) { return {{"axes", c.axes}, {"keepdims", c.keepdims}}; }

bool has_empty_reduction(const ReduceCase& c) {
  if (c.shape.num_elements() != 0) return false;
  return reduced_shape(c).num_elements() != 0;  // elements out, none in: an empty reduction
}

// -0 and +0 are equal; which one a max of both returns depends on the order of comparisons, on
// either side.
Tensor without_negative_zeros(const Tensor& t) {
  Tensor c = Tensor::from_host(t.dtype(), t.shape(), raw_data(t));
  visit_dtype(c.dtype(), [&](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      T* p = static_cast<T*>(raw_data(c));
      for (int64_t i = 0; i < c.size(); ++i)
        if (p[i] == T(0)) p[i] = T(0);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* p = static_cast<T*>(raw_data(c));
      for (int64_t i = 0; i < c.size(); ++i)
        if (p[i].bits == 0x8000) p[i].bits = 0;
    }
  });
  return c;
}

// Sums: |want - got| <= rel_mag * mag + rel_result * |want|, where mag is the same reduction of
// |x| (the error of any summation order is bounded by its unit roundoff times a length factor
// times sum |x|; near-cancelling sums are why a bound relative to the result alone cannot hold).
::testing::AssertionResult close_sums(const Tensor& want, const Tensor& got, const Tensor& mag, double rel_mag,
                                      double rel_result) {
  if (want.shape() != got.shape()) return ::testing::AssertionFailure() << "shapes differ";
  int64_t bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (int64_t i = 0; i < want.size(); ++i) {
    const double w = element(want, i), g = element(got, i), m = element(mag, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (w == g) continue;  // infinities
    if (std::isfinite(w) && std::isfinite(g) && std::fabs(w - g) <= rel_mag * m + rel_result * std::fabs(w)) continue;
    if (bad++ < 5) result << "\n  element " << i << ": CPU " << w << ", GPU " << g << ", sum |x| " << m;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return result << "\n  " << bad << " of " << want.size() << " differ";
}

// float32: the CPU sums a contiguous run of up to 2^15 elements in float (16 sequential adds per
// SIMD lane in leaves of 256, then up to 7 levels of pairwise halves: under 32 ulps, 2^-19, of
// sum |x|) and everything beyond in double; the GPU sums in double; both round the result once
// (2^-24 of |result|). 2^-18 leaves a factor of two.
constexpr double kFloatSumTolerance = 1.0 / (1 << 18);
// float64: both sides sum in double; the GPU's per-thread runs are at most a few hundred terms for
// these shapes (the chunking of reduce_geometry keeps them short), the CPU's pairwise error grows
// with the log of n. 2^-40 is far above either.
constexpr double kDoubleSumTolerance = 1.0 / (1ll << 40);

Tensor cpu_abs(const Tensor& x) { return run_on(*cpu_device(), "Abs", {x}, x.dtype(), x.shape()); }

TEST(CudaReduce, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const char* op : kReductions) {
    const bool sum = std::string(op) == "Sum" || std::string(op) == "Mean";
    for (DType dt : kCpuDtypes) {
      for (const ReduceCase& c : reduce_cases()) {
        if (!sum && has_empty_reduction(c)) continue;  // refused: tested below
        const std::string what = describe(op, dt, c);
        // Float sums get plain numbers: with float32's largest value mixed in, the CPU's float runs
        // overflow where the GPU's double sums do not (special values: SumsOfSpecialValues).
        const Values v = sum && is_floating(dt) ? Values::kSmallPower : Values::kGeneral;
        Tensor x = random_tensor(dt, c.shape, seed++, v);
        const Shape out = reduced_shape(c);
        Tensor want = run_on(*cpu_device(), op, {x}, dt, out, reduce_attrs(c));
        Tensor got = run_on(*gpu(), op, {x}, dt, out, reduce_attrs(c));
        if (!sum || !is_floating(dt)) {
          ASSERT_TRUE(same_values(without_negative_zeros(want), without_negative_zeros(got), 0)) << what;
        } else {
          Tensor mag = run_on(*cpu_device(), op, {cpu_abs(x)}, dt, out, reduce_attrs(c));
          const double tol = dt == float32 ? kFloatSumTolerance : kDoubleSumTolerance;
          ASSERT_TRUE(close_sums(want, got, mag, tol, tol)) << what;
        }
      }
    }
  }
}

Tensor cast_on_cpu(const Tensor& x, DType to) {
  return run_on(*cpu_device(), "Cast", {x}, to, x.shape(), Attrs{{"dtype", to}});
}

// float16 / bfloat16: the CPU's float32 kernel on the same (16-bit representable) values, its
// result rounded to 16 bits. Max, Min and ArgMax are exact; sums may differ by the two results'
// different roundings to 16 bits (at most one 16-bit ulp: 2^-10 of the value for float16, 2^-7
// for bfloat16; twice that for safety) plus the GPU's float accumulation error (2^-24 per term of
// a thread's run and tree level: at most about 160 terms for these sizes, under 2^-16 of sum |x|;
// 2^-15 leaves a factor of two).
TEST(CudaReduce, SixteenBitMatchesRoundedFloat32) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (DType dt : kSixteenBit) {
    const double rel_result = dt == float16 ? 1.0 / (1 << 9) : 1.0 / (1 << 6);
    for (const char* op : kReductions) {
      const bool sum = std::string(op) == "Sum" || std::string(op) == "Mean";
      for (const ReduceCase& c : reduce_cases()) {
        if (c.shape.num_elements() > (1 << 18)) continue;  // keep the sums within float16's range
        if (!sum && has_empty_reduction(c)) continue;
        const std::string what = describe(op, dt, c);
        const Values v = sum ? Values::kSmallPower : Values::kGeneral;
        Tensor x16 = cast_on_cpu(random_tensor(float32, c.shape, seed++, v), dt);
        Tensor x32 = cast_on_cpu(x16, float32);  // exactly the 16-bit values
        const Shape out = reduced_shape(c);
        Tensor want = cast_on_cpu(run_on(*cpu_device(), op, {x32}, float32, out, reduce_attrs(c)), dt);
        Tensor got = run_on(*gpu(), op, {x16}, dt, out, reduce_attrs(c));
        if (!sum) {
          ASSERT_TRUE(same_values(without_negative_zeros(want), without_negative_zeros(got), 0)) << what;
        } else {
          Tensor mag = run_on(*cpu_device(), op, {cpu_abs(x32)}, float32, out, reduce_attrs(c));
          ASSERT_TRUE(close_sums(want, got, mag, 1.0 / (1 << 15), rel_result)) << what;
        }
      }
      std::vector<std::pair<Shape, int64_t>> argmax_cases = {
          {Shape{1000}, 0}, {Shape{3, 4, 5}, 1}, {Shape{513, 1025}, 0}, {Shape{4097, 100}, -1}};
      for (const auto& [shape, axis] : argmax_cases) {
        Tensor x16 = cast_on_cpu(random_tensor(float32, shape, seed++, Values::kGeneral), dt);
        const Shape out = reduced_shape({shape, {axis}});
        const Attrs attrs{{"axis", axis}};
        Tensor want = run_on(*cpu_device(), "ArgMax", {cast_on_cpu(x16, float32)}, int64, out, attrs);
        Tensor got = run_on(*gpu(), "ArgMax", {x16}, int64, out, attrs);
        ASSERT_TRUE(same_values(want, got, 0)) << "ArgMax " << dtype_name(dt) << " " << shape.to_string();
      }
    }
  }
}

TEST(CudaReduce, SumsOfSpecialValues) {
  WEFT_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::vector<double>> rows = {{1, nan, 2}, {inf, 1, 2}, {inf, -inf, 0}, {-inf, -1, 3}, {-0.0, -0.0, -0.0}};
  for (DType dt : {float32, float64, float16, bfloat16}) {
    for (const char* op : {"Sum", "Mean"}) {
      for (const std::vector<double>& row : rows) {
        Tensor x = cast_on_cpu(Tensor::from_host(float64, Shape{3}, row.data()), dt);
        Tensor x_cpu = dt == float16 || dt == bfloat16 ? cast_on_cpu(x, float32) : x;
        Tensor want = run_on(*cpu_device(), op, {x_cpu}, x_cpu.dtype(), Shape{});
        if (x_cpu.dtype() != dt) want = cast_on_cpu(want, dt);
        Tensor got = run_on(*gpu(), op, {x}, dt, Shape{});
        EXPECT_TRUE(same_values(want, got, 0)) << op << " " << dtype_name(dt) << " " << row[0] << " " << row[1];
      }
    }
  }
}

// Integer data is drawn from [-1000, 1000] with the extremes mixed in, so long rows hold many
// ties: the first index must win on every path, split ones included.
TEST(CudaArgMax, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {Shape{1000}, 0},       {Shape{1}, 0},           {Shape{3, 4, 5}, 0},      {Shape{3, 4, 5}, 1},
      {Shape{3, 4, 5}, -1},   {Shape{513, 1025}, 1},   {Shape{513, 1025}, 0},    {Shape{4097, 100}, 1},
      {Shape{1000, 3}, 0},    {Shape{(1 << 20) + 7}, 0}, {Shape{3, 300000}, 1},  {Shape{1 << 16, 3}, 0},
      {Shape{5, 0}, 0},       {Shape{0, 5}, 1},        {Shape{100003, 3}, 1},    {Shape{5000, 8}, 1}};
  uint64_t seed = 5000;
  for (DType dt : kCpuDtypes) {
    for (const auto& [shape, axis] : cases) {
      Tensor x = random_tensor(dt, shape, seed++, Values::kGeneral);
      const Shape out = reduced_shape({shape, {axis}});
      const Attrs attrs{{"axis", axis}};
      Tensor want = run_on(*cpu_device(), "ArgMax", {x}, int64, out, attrs);
      Tensor got = run_on(*gpu(), "ArgMax", {x}, int64, out, attrs);
      ASSERT_TRUE(same_values(want, got, 0)) << "ArgMax " << dtype_name(dt) << " " << shape.to_string() << " axis "
                                             << axis;
    }
  }
}

TEST(CudaArgMax, TiesTakeTheFirstIndexAndTheFirstNanWins) {
  WEFT_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {1, 3, 3, -1, 3};
  Tensor ties = Tensor::from_host(float32, Shape{5}, v.data());
  EXPECT_EQ(run_on(*gpu(), "ArgMax", {ties}, int64, Shape{}, Attrs{{"axis", int64_t{0}}}).data<int64_t>()[0], 1);
  v = {1, 3, nan, 5, nan};
  Tensor nans = Tensor::from_host(float32, Shape{5}, v.data());
  EXPECT_EQ(run_on(*gpu(), "ArgMax", {nans}, int64, Shape{}, Attrs{{"axis", int64_t{0}}}).data<int64_t>()[0], 2);
  // The same in a row long enough to be split across blocks: ties at the start of a late chunk.
  std::vector<double> long_row(1 << 20, -5.0);
  long_row[700000] = 2;
  long_row[900000] = 2;
  long_row[300000] = 1;
  Tensor big = Tensor::from_host(float64, Shape{1 << 20}, long_row.data());
  EXPECT_EQ(run_on(*gpu(), "ArgMax", {big}, int64, Shape{}, Attrs{{"axis", int64_t{0}}}).data<int64_t>()[0], 700000);
}

void expect_fails(const char* op, const Tensor& x, DType out_dt, const Shape& out, const Attrs& attrs,
                  const std::string& message) {
  try {
    run_on(*gpu(), op, {x}, out_dt, out, attrs);
    ADD_FAILURE() << op << ": expected InvalidArgument containing: " << message;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(CudaReduce, BadInputFailsLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  Tensor empty = random_tensor(float32, Shape{0, 4}, 1, Values::kGeneral);
  const Attrs axis0{{"axes", std::vector<int64_t>{0}}};
  expect_fails("Max", empty, float32, Shape{4}, axis0,
               "[reduce_max] cannot reduce over an empty axis (input shape (0, 4)): the reduction has no identity");
  expect_fails("Min", empty, float32, Shape{4}, axis0, "cannot reduce over an empty axis");
  Tensor x = random_tensor(int32, Shape{3, 4}, 2, Values::kGeneral);
  expect_fails("Sum", x, int32, Shape{3}, Attrs{{"axes", std::vector<int64_t>{2}}},
               "[reduce_sum] axis 2 is out of range or repeated for a tensor of rank 2");
  expect_fails("Mean", x, int32, Shape{}, Attrs{{"axes", std::vector<int64_t>{1, -1}}}, "out of range or repeated");
  expect_fails("ArgMax", x, int64, Shape{3}, Attrs{{"axis", int64_t{2}}},
               "[argmax] axis 2 is out of range for a tensor of rank 2");
  expect_fails("ArgMax", empty, int64, Shape{4}, Attrs{{"axis", int64_t{0}}},
               "[argmax] cannot take the argmax over an empty axis (input shape (0, 4))");
}

// Runs without a GPU: every reduction for the CPU's dtypes and the 16-bit floats.
TEST(CudaReduceKernels, Registered) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  for (const char* name : {"Sum", "Mean", "Max", "Min", "ArgMax"}) {
    const OpDef* op = op_registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType dt : {float32, float64, int32, int64, float16, bfloat16})
      EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, dt)) << name << " " << dtype_name(dt);
    for (DType dt : kCpuDtypes) EXPECT_TRUE(has_kernel(*op, DeviceType::CPU, dt)) << name << " " << dtype_name(dt);
    EXPECT_FALSE(has_kernel(*op, DeviceType::CUDA, bool_)) << name;
  }
}

}  // namespace
}  // namespace weft::gpu_test
