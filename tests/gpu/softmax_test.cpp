// The CUDA Softmax, LogSoftmax and SparseSoftmaxCrossEntropyWithLogits (kernels/cuda/softmax.cu)
// against the CPU kernels: rows short (a warp each) and long (a block each), columns (axis not
// last), special values, an output aliasing its input, 16-bit types against the float32 CPU
// kernel rounded, and the refusal of out-of-range labels. The registration test also runs
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

struct Tolerance {
  double rel, abs;
};

// Softmax, float32: y = exp(d) * (1 / s) with d = x - max exact on both sides; CUDA's expf is
// within 2 ulp, glibc's within 1; the CPU sums a row's exps pairwise in float (16 sequential adds
// per SIMD lane in leaves of 256, then up to 6 levels of halves: under 24 ulp of s, all terms
// being positive), the GPU in double; three roundings: under 32 ulp, so 64 ulp (2^-18) relative,
// with an absolute floor for subnormal outputs. float64: the GPU's per-thread double sums of up to
// 2^12 terms, 2^-41 relative; 2^-38.
// LogSoftmax: y = d - log(s): the error is that of log(s) (absolute, ~ the relative error of s,
// plus an ulp of log(s) <= 16) and of one rounding of y.
Tolerance softmax_tolerance(DType dt, bool log) {
  switch (dt) {
    case DType::Float32: return log ? Tolerance{1.0 / (1 << 21), 1.0 / (1 << 17)} : Tolerance{1.0 / (1 << 18), 1e-37};
    case DType::Float64: return log ? Tolerance{1.0 / (1ll << 44), 1.0 / (1ll << 38)} : Tolerance{1.0 / (1ll << 38), 1e-300};
    // 16-bit: the two results' roundings to 16 bits differ by at most one 16-bit ulp (2^-10 of
    // the value for float16, 2^-7 for bfloat16; twice for safety), plus the float computation.
    case DType::Float16: return {1.0 / (1 << 9), log ? 1.0 / (1 << 16) : 1.0 / (1 << 23)};
    default: return {1.0 / (1 << 6), log ? 1.0 / (1 << 16) : 1e-37};
  }
}

struct SoftmaxCase {
  Shape shape;
  int64_t axis;
  Values values;  // kSmallPower: numbers in [-3, 3]; kGeneral: with inf, NaN, extremes mixed in
};

std::vector<SoftmaxCase> softmax_cases() {
  return {
      {Shape{1000}, -1, Values::kSmallPower},
      {Shape{1}, 0, Values::kSmallPower},
      {Shape{1, 1}, -1, Values::kSmallPower},
      {Shape{3, 4, 5}, -1, Values::kSmallPower},
      {Shape{3, 4, 5}, 1, Values::kSmallPower},      // columns
      {Shape{3, 4, 5}, 0, Values::kSmallPower},
      {Shape{4097, 100}, -1, Values::kSmallPower},   // a warp per row
      {Shape{100, 5000}, 1, Values::kSmallPower},    // a block per row
      {Shape{2, (1 << 20) + 3}, -1, Values::kSmallPower},  // few long rows: split in chunks
      {Shape{8, 50000}, 1, Values::kSmallPower},
      {Shape{3, 40000}, -1, Values::kGeneral},       // chunks with inf and NaN
      {Shape{64, 300, 40}, 1, Values::kSmallPower},
      {Shape{200, 7}, -1, Values::kGeneral},         // some rows hold inf or NaN, most do not
      {Shape{7, 200}, 0, Values::kGeneral},
      {Shape{0, 5}, -1, Values::kSmallPower},
      {Shape{5, 0}, -1, Values::kSmallPower},
  };
}

Tensor cast_on_cpu(const Tensor& x, DType to) {
  return run_on(*cpu_device(), "Cast", {x}, to, x.shape(), Attrs{{"dtype", to}});
}

TEST(CudaSoftmax, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const bool log = std::string(op) == "LogSoftmax";
    for (DType dt : {float32, float64}) {
      for (const SoftmaxCase& c : softmax_cases()) {
        Tensor x = random_tensor(dt, c.shape, seed++, c.values);
        const Attrs attrs{{"axis", c.axis}};
        Tensor want = run_on(*cpu_device(), op, {x}, dt, c.shape, attrs);
        Tensor got = run_on(*gpu(), op, {x}, dt, c.shape, attrs);
        const Tolerance t = softmax_tolerance(dt, log);
        ASSERT_TRUE(close(want, got, t.rel, t.abs))
            << op << " " << dtype_name(dt) << " " << c.shape.to_string() << " axis " << c.axis;
      }
    }
  }
}

TEST(CudaSoftmax, SixteenBitMatchesRoundedFloat32) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const bool log = std::string(op) == "LogSoftmax";
    for (DType dt : {float16, bfloat16}) {
      for (const SoftmaxCase& c : softmax_cases()) {
        if (c.shape.num_elements() > (1 << 20)) continue;
        Tensor x16 = cast_on_cpu(random_tensor(float32, c.shape, seed++, c.values), dt);
        const Attrs attrs{{"axis", c.axis}};
        Tensor want = cast_on_cpu(run_on(*cpu_device(), op, {cast_on_cpu(x16, float32)}, float32, c.shape, attrs), dt);
        Tensor got = run_on(*gpu(), op, {x16}, dt, c.shape, attrs);
        const Tolerance t = softmax_tolerance(dt, log);
        ASSERT_TRUE(close(want, got, t.rel, t.abs))
            << op << " " << dtype_name(dt) << " " << c.shape.to_string() << " axis " << c.axis;
      }
    }
  }
}

// An executor may hand the input's buffer to the output: every element is read before the same
// thread writes it.
TEST(CudaSoftmax, OutputMayAliasTheInput) {
  WEFT_REQUIRE_GPU();
  const OpDef* op = op_registry().find("Softmax");
  ASSERT_NE(op, nullptr);
  for (const Shape& shape : {Shape{300, 100}, Shape{3, 5000}, Shape{20, 30, 40}, Shape{2, 100000}}) {
    const int64_t axis = shape.rank() == 3 ? 1 : -1;
    const Attrs attrs{{"axis", axis}};
    Tensor x = random_tensor(float32, shape, 7, Values::kSmallPower);
    Tensor want = run_on(*cpu_device(), "Softmax", {x}, float32, shape, attrs);
    std::vector<Tensor> ins{x.to(gpu())};
    const void* buffer = raw_data(ins[0]);
    std::vector<Tensor> outs(1);
    run_kernel(*op, find_kernel(*op, DeviceType::CUDA, float32), *gpu(), attrs, ins, outs,
               [&](size_t) { return TensorMeta{float32, shape}; }, nullptr, /*reuse_input=*/0);
    ins.clear();
    EXPECT_EQ(raw_data(outs[0]), buffer) << "the output did not take the input's buffer";
    const Tolerance t = softmax_tolerance(float32, false);
    EXPECT_TRUE(close(want, outs[0].to(cpu_device()), t.rel, t.abs)) << shape.to_string();
  }
}

TEST(CudaSoftmax, AxisOutOfRangeFails) {
  WEFT_REQUIRE_GPU();
  Tensor x = random_tensor(float32, Shape{3, 4}, 1, Values::kSmallPower);
  try {
    run_on(*gpu(), "LogSoftmax", {x}, float32, x.shape(), Attrs{{"axis", int64_t{2}}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[log_softmax] axis 2 is out of range for a tensor of rank 2"),
              std::string::npos)
        << e.what();
  }
}

// Both outputs of a two-output op on `device`, back on the host.
std::vector<Tensor> run_xent(Device& device, const Tensor& logits, const Tensor& labels) {
  const OpDef* op = op_registry().find("SparseSoftmaxCrossEntropyWithLogits");
  if (!op) throw InvalidArgument("no SparseSoftmaxCrossEntropyWithLogits");
  KernelFn fn = find_kernel(*op, device.type(), logits.dtype());
  if (!fn) throw InvalidArgument("no kernel for " + std::string(dtype_name(logits.dtype())));
  std::vector<Tensor> ins{logits.to(&device), labels.to(&device)};
  std::vector<Tensor> outs(2);
  const Shape loss_shape{logits.shape()[0]};
  run_kernel(*op, fn, device, Attrs{}, ins, outs, [&](size_t i) {
    return TensorMeta{logits.dtype(), i == 0 ? loss_shape : logits.shape()};
  });
  return {outs[0].to(cpu_device()), outs[1].to(cpu_device())};
}

Tensor random_labels(DType dt, int64_t n, int64_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& l : v) l = static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
  Tensor t64 = Tensor::from_host(int64, Shape{n}, v.data());
  return run_on(*cpu_device(), "Cast", {t64}, dt, t64.shape(), Attrs{{"dtype", dt}});
}

// The backprop is softmax - one_hot; comparing p - 1 relatively would test the cancellation, not
// the kernel, so 1 is added back at the label on both sides first.
::testing::AssertionResult close_backprop(const Tensor& want, const Tensor& got, const Tensor& labels, double rel,
                                          double abs) {
  const int64_t classes = want.shape()[1];
  int64_t bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (int64_t i = 0; i < want.size(); ++i) {
    const double at_label = static_cast<int64_t>(element(labels, i / classes)) == i % classes ? 1.0 : 0.0;
    const double w = element(want, i) + at_label, g = element(got, i) + at_label;
    if ((std::isnan(w) && std::isnan(g)) || w == g) continue;
    // p - 1 was rounded once more at the label: half an ulp of 1 in the output type.
    if (std::isfinite(w) && std::isfinite(g) && std::fabs(w - g) <= rel * std::fabs(w) + abs + at_label * rel) continue;
    if (bad++ < 5) result << "\n  element " << i << ": CPU " << w << ", GPU " << g << " (softmax)";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return result << "\n  " << bad << " of " << want.size() << " differ";
}

// The CPU sums a row sequentially in the logits' type: up to `classes` ulps of relative error,
// which bounds the tolerance; 64 more cover exp, log and the roundings. The loss log(s) - d is
// compared with an absolute term, its error being that of log(s).
TEST(CudaSparseXent, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const std::vector<std::pair<int64_t, int64_t>> cases = {{1, 1},    {7, 5},    {1000, 10}, {300, 1000},
                                                          {64, 5000}, {0, 5},   {3, 200}};
  uint64_t seed = 1;
  for (DType dt : {float32, float64, float16, bfloat16}) {
    for (DType label_dt : {int32, int64, uint8}) {
      for (const auto& [n, classes] : cases) {
        if (label_dt == uint8 && classes > 256) continue;
        const bool sixteen = dt == float16 || dt == bfloat16;
        Tensor x = random_tensor(sixteen ? float32 : dt, Shape{n, classes}, seed++,
                                 classes == 200 ? Values::kGeneral : Values::kSmallPower);
        Tensor labels = random_labels(label_dt, n, classes, seed++);
        std::vector<Tensor> want, got;
        double rel;
        if (sixteen) {
          Tensor x16 = cast_on_cpu(x, dt);
          want = run_xent(*cpu_device(), cast_on_cpu(x16, float32), labels);
          want = {cast_on_cpu(want[0], dt), cast_on_cpu(want[1], dt)};
          got = run_xent(*gpu(), x16, labels);
          rel = dt == float16 ? 1.0 / (1 << 9) : 1.0 / (1 << 6);
        } else {
          want = run_xent(*cpu_device(), x, labels);
          got = run_xent(*gpu(), x, labels);
          rel = static_cast<double>(classes + 64) * (dt == float32 ? 1.0 / (1 << 24) : 1.0 / (1ll << 52));
        }
        const std::string what = std::string(dtype_name(dt)) + " labels " + std::string(dtype_name(label_dt)) + " (" +
                                 std::to_string(n) + ", " + std::to_string(classes) + ")";
        ASSERT_TRUE(close(want[0], got[0], rel, rel)) << "loss " << what;
        ASSERT_TRUE(close_backprop(want[1], got[1], labels, rel, dt == float16 ? 1.0 / (1 << 23) : 1e-37))
            << "backprop " << what;
      }
    }
  }
}

TEST(CudaSparseXent, OutOfRangeLabelsFailLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = random_tensor(float32, Shape{3, 5}, 1, Values::kSmallPower);
  std::vector<int32_t> bad = {0, 5, -1};
  Tensor labels = Tensor::from_host(int32, Shape{3}, bad.data());
  std::string cpu_message;
  try {
    run_xent(*cpu_device(), x, labels);
  } catch (const InvalidArgument& e) {
    cpu_message = e.what();
  }
  ASSERT_NE(cpu_message.find("label 5 of example 1 is outside [0, 5)"), std::string::npos) << cpu_message;
  try {
    run_xent(*gpu(), x, labels);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), cpu_message);
  }
  // The error is cleared: good labels work next.
  std::vector<int32_t> good = {0, 4, 2};
  std::vector<Tensor> got = run_xent(*gpu(), x, Tensor::from_host(int32, Shape{3}, good.data()));
  std::vector<Tensor> want = run_xent(*cpu_device(), x, Tensor::from_host(int32, Shape{3}, good.data()));
  EXPECT_TRUE(close(want[0], got[0], 1e-5, 1e-5));
  // uint8 labels past the class count, and int64 labels far out of range.
  std::vector<uint8_t> big = {1, 2, 200};
  EXPECT_THROW(run_xent(*gpu(), x, Tensor::from_host(uint8, Shape{3}, big.data())), InvalidArgument);
  std::vector<int64_t> huge = {int64_t{1} << 40, 0, 0};
  EXPECT_THROW(run_xent(*gpu(), x, Tensor::from_host(int64, Shape{3}, huge.data())), InvalidArgument);
}

// Runs without a GPU.
TEST(CudaSoftmaxKernels, Registered) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  for (const char* name : {"Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits"}) {
    const OpDef* op = op_registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType dt : {float32, float64, float16, bfloat16})
      EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, dt)) << name << " " << dtype_name(dt);
    for (DType dt : {float32, float64}) EXPECT_TRUE(has_kernel(*op, DeviceType::CPU, dt)) << name;
    EXPECT_FALSE(has_kernel(*op, DeviceType::CUDA, int32)) << name;
  }
}

}  // namespace
}  // namespace weft::gpu_test
