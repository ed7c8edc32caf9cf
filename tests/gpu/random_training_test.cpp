// The CUDA RandomUniform / RandomNormal and the fused optimizer updates against the CPU kernels:
// the same seed and stream give the same numbers (uniform bit for bit, normal within a few ulps),
// and the updates change the variable and slot buffers exactly as the CPU's do. The registration
// test also runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"

namespace weft::gpu_test {
namespace {

// Runs a random op on `device` as run `execution` of a compiled node would.
Tensor draw_on(Device& device, const char* op_name, const Attrs& attrs, DType dt, const Shape& shape,
               uint64_t execution) {
  const OpDef* op = op_registry().find(op_name);
  KernelFn fn = find_kernel(*op, device.type(), dt);
  if (!fn) throw InvalidArgument(std::string("no kernel for ") + op_name);
  std::vector<Tensor> outs(1);
  run_kernel(*op, fn, device, attrs, {}, outs, [&](size_t) { return TensorMeta{dt, shape}; }, nullptr, -1, execution);
  return outs[0].to(cpu_device());
}

std::vector<Shape> random_shapes() { return {Shape{0}, Shape{1}, Shape{3}, Shape{5}, Shape{7, 9}, Shape{1000003}}; }

TEST(CudaRandom, UniformIsBitIdenticalToTheCpu) {
  WEFT_REQUIRE_GPU();
  struct Range {
    double low, high;
  };
  // The last range rounds a + (b - a) * u onto `high` in float32, which both clamp below it.
  for (const Range r : {Range{0, 1}, Range{-3, 5}, Range{1e-3, 2e-3}, Range{16777216.0, 16777218.0}})
    for (DType dt : {float32, float64})
      for (const Shape& s : random_shapes())
        for (int64_t seed : {int64_t{0}, int64_t{42}, int64_t{1} << 40})
          for (uint64_t execution : {0u, 3u}) {
            Attrs attrs{{"shape", s}, {"low", r.low}, {"high", r.high}, {"seed", seed}, {"dtype", dt}};
            const Tensor want = draw_on(*cpu_device(), "RandomUniform", attrs, dt, s, execution);
            const Tensor got = draw_on(*gpu(), "RandomUniform", attrs, dt, s, execution);
            ASSERT_TRUE(same_values(want, got, 0)) << dtype_name(dt) << " " << s.to_string() << " seed " << seed;
          }
}

// Normal draws too: both devices compute kernels/random_values.h's logarithm, sine and cosine.
TEST(CudaRandom, NormalIsBitIdenticalToTheCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {float32, float64})
    for (const Shape& s : random_shapes())
      for (double mean : {0.0, 1.5})
        for (uint64_t execution : {0u, 5u}) {
          Attrs attrs{{"shape", s}, {"mean", mean}, {"stddev", 2.0}, {"seed", int64_t{7}}, {"dtype", dt}};
          const Tensor want = draw_on(*cpu_device(), "RandomNormal", attrs, dt, s, execution);
          const Tensor got = draw_on(*gpu(), "RandomNormal", attrs, dt, s, execution);
          ASSERT_TRUE(same_values(want, got, 0)) << dtype_name(dt) << " " << s.to_string() << " mean " << mean;
        }
}

// An unseeded node of a compiled graph: key = stream_seed, stream = the run number, as on the CPU
// (runtime/random_seed.h); different runs give different numbers.
TEST(CudaRandom, CompiledStreamsFollowTheCpu) {
  WEFT_REQUIRE_GPU();
  const Shape s{4099};
  Attrs attrs{{"shape", s}, {"low", 0.0}, {"high", 1.0}, {"seed", int64_t{-1}}, {"stream_seed", int64_t{12345}},
              {"dtype", float32}};
  Tensor first;
  for (uint64_t execution : {0u, 1u, 2u}) {
    const Tensor want = draw_on(*cpu_device(), "RandomUniform", attrs, float32, s, execution);
    const Tensor got = draw_on(*gpu(), "RandomUniform", attrs, float32, s, execution);
    ASSERT_TRUE(same_values(want, got, 0)) << "run " << execution;
    if (execution == 0) first = got;
    else EXPECT_FALSE(same_values(first, got, 0)) << "run " << execution << " repeated run 0's numbers";
  }
}

// ---- optimizer updates ----

Tensor host_copy(const Tensor& t) { return Tensor::from_host(t.dtype(), t.shape(), host_bytes(t).data()); }

// Runs an update on `device` and returns its inputs (variable, slots, grad) afterwards, on the
// host. The inputs are copied first: the update writes them in place. `lr_on_host` keeps a
// learning-rate input in host memory even for the GPU.
std::vector<Tensor> update_on(Device& device, const char* op_name, const std::vector<Tensor>& inputs,
                              const Attrs& attrs, bool lr_on_host = false) {
  const OpDef* op = op_registry().find(op_name);
  KernelFn fn = find_kernel(*op, device.type(), inputs[0].dtype());
  if (!fn) throw InvalidArgument(std::string("no kernel for ") + op_name);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool keep_on_host = lr_on_host && static_cast<int>(i) >= op->min_inputs;
    ins.push_back(device.type() == DeviceType::CPU || keep_on_host ? host_copy(inputs[i]) : inputs[i].to(&device));
  }
  std::vector<Tensor> outs;
  run_kernel(*op, fn, device, attrs, ins, outs, [&](size_t) { return TensorMeta{}; });
  std::vector<Tensor> back;
  for (int i = 0; i < op->min_inputs; ++i) back.push_back(ins[static_cast<size_t>(i)].to(cpu_device()));
  return back;
}

struct Update {
  const char* op;
  int tensors;  // variable, slots, grad
  Attrs attrs;
};

std::vector<Update> updates() {
  return {{"ApplyGradientDescent", 2, Attrs{{"lr", 0.1}}},
          {"ApplyMomentum", 3, Attrs{{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", false}}},
          {"ApplyMomentum", 3, Attrs{{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}}},
          {"ApplyAdam", 4, Attrs{{"lr", 0.001}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-7}}},
          {"ApplyAdamW", 4,
           Attrs{{"lr", 0.001}, {"decay", 0.0004}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-7}}}};
}

TEST(CudaTraining, UpdatesAreBitIdenticalToTheCpu) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const Update& u : updates())
    for (DType dt : {float32, float64})
      for (const Shape& s : {Shape{0}, Shape{1}, Shape{1000}, Shape{37, 41}, Shape{(1 << 20) + 3}})
        for (int lr_input = 0; lr_input < 3; ++lr_input) {  // attribute; float64 input on the device; on the host
          std::vector<Tensor> ins;
          for (int i = 0; i < u.tensors; ++i) {
            Tensor t = random_tensor(dt, s, seed++, Values::kSmallPower);
            // Adam's second moment is non-negative.
            if (std::string(u.op).starts_with("ApplyAdam") && i == 2) {
              std::vector<double> v(static_cast<size_t>(t.size()));
              for (int64_t j = 0; j < t.size(); ++j) v[static_cast<size_t>(j)] = std::fabs(element(t, j));
              if (dt == float64) t = Tensor::from_host(dt, s, v.data());
              else {
                std::vector<float> f(v.begin(), v.end());
                t = Tensor::from_host(dt, s, f.data());
              }
            }
            ins.push_back(t);
          }
          Attrs attrs = u.attrs;
          if (lr_input > 0) {
            const double lr = 0.0123, decay = 0.0007;  // ApplyAdamW takes the decay factor after the rate
            ins.push_back(Tensor::from_host(float64, Shape{}, &lr));
            if (std::string(u.op) == "ApplyAdamW") ins.push_back(Tensor::from_host(float64, Shape{}, &decay));
          }
          const std::vector<Tensor> want = update_on(*cpu_device(), u.op, ins, attrs);
          const std::vector<Tensor> got = update_on(*gpu(), u.op, ins, attrs, lr_input == 2);
          for (int i = 0; i + 1 < u.tensors; ++i)  // the variable and the slots (the gradient is read only)
            ASSERT_TRUE(same_values(want[static_cast<size_t>(i)], got[static_cast<size_t>(i)], 0))
                << u.op << " " << dtype_name(dt) << " " << s.to_string() << " buffer " << i << " lr input "
                << lr_input;
        }
}

// Float64 sums in another order than the CPU's: equal within the rounding of the result, and the
// same bits on every run.
TEST(CudaTraining, GlobalSquaredNormNearTheCpuAndDeterministic) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 50;
  for (DType dt : {float32, float64, float16, bfloat16}) {
    std::vector<Tensor> ins;
    for (const Shape& s : {Shape{0}, Shape{1}, Shape{1000}, Shape{37, 41}, Shape{(1 << 20) + 3}, Shape{}})
      ins.push_back(random_tensor(dt, s, seed++, Values::kSmallPower));
    const Tensor want = run_on(*cpu_device(), "GlobalSquaredNorm", ins, dt, Shape{});
    const Tensor got = run_on(*gpu(), "GlobalSquaredNorm", ins, dt, Shape{});
    const double rel = dt == float64 ? 1e-13 : dt == float32 ? 1e-7 : 1e-2;
    EXPECT_TRUE(same_values(want, got, rel)) << dtype_name(dt);
    EXPECT_EQ(host_bytes(got), host_bytes(run_on(*gpu(), "GlobalSquaredNorm", ins, dt, Shape{}))) << dtype_name(dt);
  }
}

TEST(CudaTraining, RefusesMismatchedBuffersInsteadOfWritingOutOfBounds) {
  WEFT_REQUIRE_GPU();
  const std::vector<Tensor> ins = {random_tensor(float32, Shape{100}, 1, Values::kSmallPower),
                                   random_tensor(float32, Shape{10}, 2, Values::kSmallPower)};
  EXPECT_THROW(update_on(*gpu(), "ApplyGradientDescent", ins, Attrs{{"lr", 0.1}}), InvalidArgument);
}

// Runs without a GPU: the CUDA kernels exist for exactly the CPU's dtypes.
TEST(CudaRandomTrainingKernels, RegisteredForTheCpuDtypes) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  for (const char* name :
       {"RandomUniform", "RandomNormal", "ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyAdamW",
        "GlobalSquaredNorm"}) {
    const OpDef* op = op_registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType dt = static_cast<DType>(d);
      EXPECT_EQ(has_kernel(*op, DeviceType::CUDA, dt), has_kernel(*op, DeviceType::CPU, dt)) << name << " " << dtype_name(dt);
    }
    EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, float32)) << name;
    EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, float64)) << name;
  }
}

}  // namespace
}  // namespace weft::gpu_test
