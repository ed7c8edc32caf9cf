// Every CUDA elementwise kernel against the CPU kernel of the same op and dtype, on random inputs
// with broadcasting, special values and edge sizes. The registration test also runs without a GPU.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "elementwise_ops.h"
#include "gpu_test_util.h"
#include "runtime/error.h"

namespace weft::gpu_test {
namespace {

struct OpCase {
  const char* op;
  int arity;                     // 1, 2, or 3 (Select)
  std::vector<DType> dtypes;     // exactly those the CPU registers
  bool bool_output = false;      // comparisons
  double rel_tolerance = 0;      // 0: bit-identical (NaN matches NaN)
  Values values = Values::kGeneral;
  Values second_values = Values::kGeneral;
};

// gtest prints a parameter in test listings (and CTest's names): the op is enough.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.op; }

std::vector<DType> numeric_and_bool() { return {float32, float64, int32, int64, bool_}; }

// Relative tolerances: CUDA's float exp/log/erf/tanh/pow are within 1 to 4 ulp (CUDA C Programming
// Guide, "Mathematical Functions"), glibc's within 1; 2^-23 is one float ulp.
constexpr double kApprox = 16.0 / (1 << 23);

// What an op needs besides bit-identical results on general values, by name: a tolerance for the
// float functions whose CUDA and CPU implementations differ in the last bits, other operands.
struct Needs {
  double rel_tolerance = 0;
  Values values = Values::kGeneral;
  Values second_values = Values::kGeneral;
};
Needs needs_of(const std::string& op) {
  if (op == "Exp" || op == "Log" || op == "Erf" || op == "Sigmoid" || op == "Tanh") return {kApprox};
  if (op == "Sin" || op == "Cos") return {kApprox, Values::kSmallPower};
  if (op == "Div") return {0, Values::kGeneral, Values::kNonZero};
  if (op == "Pow") return {kApprox, Values::kGeneral, Values::kSmallPower};
  return {};
}

// Every plain elementwise op of the registry (tests/elementwise_ops.h), so a new one is checked
// here without a line of its own, on exactly the dtypes the CPU registers (16-bit aside: tested
// below against float32); and Select.
std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  for (const test_ops::ElementwiseOp& op : test_ops::elementwise_ops()) {
    std::vector<DType> dtypes;
    for (DType dt : numeric_and_bool())
      if (has_kernel(*op.def, DeviceType::CPU, dt)) dtypes.push_back(dt);
    const Needs n = needs_of(op.def->name);
    cases.push_back({op.def->name.c_str(), op.arity, dtypes, op.bool_output, n.rel_tolerance, n.values, n.second_values});
  }
  cases.push_back({"Select", 3, numeric_and_bool()});
  return cases;
}

// (a, b) shape pairs: same shape (flat kernel), every broadcast pattern (strided kernel),
// scalars, empty tensors, and sizes past one block and past one grid's worth of a grid-stride loop.
std::vector<std::pair<Shape, Shape>> binary_shapes() {
  return {{Shape{1000}, Shape{1000}},        {Shape{}, Shape{}},
          {Shape{7, 1}, Shape{1, 5}},        {Shape{3, 4, 5}, Shape{5}},
          {Shape{3, 4, 5}, Shape{4, 1}},     {Shape{}, Shape{6}},
          {Shape{6}, Shape{}},               {Shape{2, 1, 3}, Shape{2, 4, 3}},
          {Shape{0, 3}, Shape{3}},           {Shape{0}, Shape{0}},
          {Shape{513, 1025}, Shape{1025}},   {Shape{(1 << 24) + 3}, Shape{(1 << 24) + 3}},
          {Shape{1 << 12, 1 << 12}, Shape{1 << 12, 1}}};
}

std::vector<Shape> unary_shapes() {
  return {Shape{}, Shape{0}, Shape{1}, Shape{1000}, Shape{3, 5, 7}, Shape{(1 << 24) + 3}};
}

class CudaElementwise : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaElementwise, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const OpCase& c = GetParam();
  uint64_t seed = 1;
  for (DType dt : c.dtypes) {
    std::vector<std::vector<Shape>> shape_sets;
    if (c.arity == 1) {
      for (const Shape& s : unary_shapes()) shape_sets.push_back({s});
    } else {
      for (const auto& [a, b] : binary_shapes()) {
        if (c.arity == 2) shape_sets.push_back({a, b});
        else shape_sets.push_back({b, a, broadcast(a, b)});  // Select(cond, a, b), cond broadcast too
      }
    }
    for (const std::vector<Shape>& shapes : shape_sets) {
      std::vector<Tensor> ins;
      Shape out_shape = shapes[0];
      for (size_t k = 0; k < shapes.size(); ++k) {
        DType in_dt = (c.arity == 3 && k == 0) ? bool_ : dt;
        Values v = k == 1 ? c.second_values : c.values;
        ins.push_back(random_tensor(in_dt, shapes[k], seed++, v));
        out_shape = broadcast(out_shape, shapes[k]);
      }
      const DType out_dt = c.bool_output ? bool_ : dt;
      std::string what = std::string(c.op) + " " + std::string(dtype_name(dt));
      for (const Shape& s : shapes) what += " " + s.to_string();
      Tensor want = run_on(*cpu_device(), c.op, ins, out_dt, out_shape);
      Tensor got = run_on(*gpu(), c.op, ins, out_dt, out_shape);
      // Integer Pow is exact; only the float one is approximate.
      const double rel = is_floating(dt) ? c.rel_tolerance : 0;
      ASSERT_TRUE(same_values(want, got, rel)) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaElementwise, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.op); });

// Runs without a GPU: what the CPU registers for these ops, CUDA registers too, plus float16 and
// bfloat16 for every one of them, and nothing more.
TEST(CudaKernels, RegisteredForTheCpuDtypes) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  std::vector<OpCase> cases = op_cases();
  cases.push_back({"Cast", 1, {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_}});
  for (const OpCase& c : cases) {
    const OpDef* op = op_registry().find(c.op);
    ASSERT_NE(op, nullptr) << c.op;
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType dt = static_cast<DType>(d);
      const bool sixteen = dt == float16 || dt == bfloat16;
      EXPECT_EQ(has_kernel(*op, DeviceType::CUDA, dt), sixteen || has_kernel(*op, DeviceType::CPU, dt))
          << c.op << " " << dtype_name(dt);
    }
    for (DType dt : c.dtypes) EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, dt)) << c.op << " " << dtype_name(dt);
  }
}

Tensor cast_on_cpu(const Tensor& x, DType to) {
  return run_on(*cpu_device(), "Cast", {x}, to, x.shape(), Attrs{{"dtype", to}});
}

// float16 / bfloat16 against the CPU's float32 kernel on the same values, rounded to 16 bits. The
// GPU computes in float and rounds once, so where the float result is exact or correctly rounded
// (everything but exp, log, tanh, sigmoid and pow) the answers are the same bits; otherwise the
// float results differ by a few ulp, which can move the 16-bit rounding by one ulp (2^-10 of the
// value for float16, 2^-7 for bfloat16; twice for safety).
TEST_P(CudaElementwise, SixteenBitMatchesRoundedFloat32) {
  WEFT_REQUIRE_GPU();
  const OpCase& c = GetParam();
  uint64_t seed = 7000;
  for (DType dt : {float16, bfloat16}) {
    const double rel = c.rel_tolerance == 0 ? 0 : dt == float16 ? 1.0 / (1 << 9) : 1.0 / (1 << 6);
    std::vector<std::vector<Shape>> shape_sets;
    if (c.arity == 1) {
      for (const Shape& s : unary_shapes()) shape_sets.push_back({s});
    } else {
      for (const auto& [a, b] : binary_shapes()) {
        if (a.num_elements() > (1 << 20)) continue;
        if (c.arity == 2) shape_sets.push_back({a, b});
        else shape_sets.push_back({b, a, broadcast(a, b)});
      }
    }
    for (const std::vector<Shape>& shapes : shape_sets) {
      std::vector<Tensor> ins16, ins32;
      Shape out_shape = shapes[0];
      for (size_t k = 0; k < shapes.size(); ++k) {
        out_shape = broadcast(out_shape, shapes[k]);
        if (c.arity == 3 && k == 0) {
          Tensor cond = random_tensor(bool_, shapes[k], seed++, Values::kGeneral);
          ins16.push_back(cond);
          ins32.push_back(cond);
          continue;
        }
        Tensor x16 = cast_on_cpu(random_tensor(float32, shapes[k], seed++, k == 1 ? c.second_values : c.values), dt);
        ins16.push_back(x16);
        ins32.push_back(cast_on_cpu(x16, float32));
      }
      std::string what = std::string(c.op) + " " + std::string(dtype_name(dt));
      for (const Shape& s : shapes) what += " " + s.to_string();
      Tensor want = run_on(*cpu_device(), c.op, ins32, c.bool_output ? bool_ : float32, out_shape);
      if (!c.bool_output) want = cast_on_cpu(want, dt);
      Tensor got = run_on(*gpu(), c.op, ins16, c.bool_output ? bool_ : dt, out_shape);
      ASSERT_TRUE(same_values(want, got, rel)) << what;
    }
  }
}

TEST(CudaCast, EveryPairMatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const DType all[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};
  uint64_t seed = 100;
  for (DType from : all) {
    for (Values v : {Values::kGeneral, Values::kAllBits}) {
      Tensor in = random_tensor(from, Shape{20011}, seed++, v);
      for (DType to : all) {
        Attrs attrs{{"dtype", to}};
        Tensor want = run_on(*cpu_device(), "Cast", {in}, to, in.shape(), attrs);
        Tensor got = run_on(*gpu(), "Cast", {in}, to, in.shape(), attrs);
        ASSERT_TRUE(same_values(want, got, 0)) << dtype_name(from) << " -> " << dtype_name(to);
      }
    }
  }
}

// int64 values just around float16/bfloat16 rounding ties, where a double rounding would go wrong.
TEST(CudaCast, Int64NearSixteenBitTies) {
  WEFT_REQUIRE_GPU();
  std::vector<int64_t> v;
  for (int e = 11; e < 63; ++e)
    for (int64_t d : {-2, -1, 0, 1, 2}) {
      const int64_t base = (int64_t{1} << e) + (int64_t{1} << (e > 10 ? e - 11 : 0));
      v.push_back(base + d);
      v.push_back(-(base + d));
    }
  Tensor in = Tensor::from_host(int64, Shape{static_cast<int64_t>(v.size())}, v.data());
  for (DType to : {float16, bfloat16, float32, float64}) {
    Attrs attrs{{"dtype", to}};
    EXPECT_TRUE(same_values(run_on(*cpu_device(), "Cast", {in}, to, in.shape(), attrs),
                            run_on(*gpu(), "Cast", {in}, to, in.shape(), attrs), 0))
        << dtype_name(to);
  }
}

template <class T>
Tensor vec(DType dt, std::vector<T> values) {
  return Tensor::from_host(dt, Shape{static_cast<int64_t>(values.size())}, values.data());
}

TEST(CudaIntegerErrors, DivisionByZeroFailsLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  Tensor a = vec<int32_t>(int32, {6, 7, 8, 9}), zero = vec<int32_t>(int32, {1, 2, 0, 3});
  try {
    run_on(*gpu(), "Div", {a, zero}, int32, Shape{4});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[div] integer division by zero"), std::string::npos) << e.what();
  }
  // The error is cleared: the next division works and floors like the CPU.
  Tensor b = vec<int64_t>(int64, {-7, 7, -7, 7}), d = vec<int64_t>(int64, {2, -2, -2, 2});
  Tensor got = run_on(*gpu(), "Div", {b, d}, int64, Shape{4});
  EXPECT_EQ(std::vector<int64_t>(got.data<int64_t>(), got.data<int64_t>() + 4), (std::vector<int64_t>{-4, -4, 3, 3}));
  // Broadcast zero divisor, int64.
  EXPECT_THROW(run_on(*gpu(), "Div", {b, vec<int64_t>(int64, {0})}, int64, Shape{4}), InvalidArgument);
}

TEST(CudaIntegerErrors, NegativeIntegerPowerFails) {
  WEFT_REQUIRE_GPU();
  Tensor a = vec<int64_t>(int64, {2, 3}), e = vec<int64_t>(int64, {3, -1});
  try {
    run_on(*gpu(), "Pow", {a, e}, int64, Shape{2});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& err) {
    EXPECT_NE(std::string(err.what()).find("negative integer powers"), std::string::npos) << err.what();
  }
  Tensor got = run_on(*gpu(), "Pow", {a, vec<int64_t>(int64, {10, 3})}, int64, Shape{2});
  EXPECT_EQ(got.data<int64_t>()[0], 1024);
  EXPECT_EQ(got.data<int64_t>()[1], 27);
}

TEST(CudaElementwiseShapes, TooManyUnmergeableDimsFailCleanly) {
  WEFT_REQUIRE_GPU();
  Shape big{2, 2, 2, 2, 2, 2, 2, 2, 2}, alternating{2, 1, 2, 1, 2, 1, 2, 1, 2};
  Tensor a = random_tensor(float32, big, 1, Values::kGeneral), b = random_tensor(float32, alternating, 2, Values::kGeneral);
  EXPECT_THROW(run_on(*gpu(), "Add", {a, b}, float32, big), InvalidArgument);
}

}  // namespace
}  // namespace weft::gpu_test
