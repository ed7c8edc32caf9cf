// The CUDA MatMul and FusedMatMul (cuBLASLt, kernels/cuda/matmul.cpp) against the CPU kernels:
// every transpose, broadcast batch dims, empty and size-1 products, all activations, and float16 /
// bfloat16 against the CPU's float32 product of the same (rounded) values. The registration test
// also runs without a GPU.
//
// Tolerance: a float product differs from the CPU's by the rounding of a different summation
// order, at most about k * eps * sum_p |a_ip| |b_pj|. That bound is computed by running the CPU
// kernel on |A| and |B|, and each element must be within kSlack * eps * bound (plus, for 16-bit
// outputs, the rounding of the result).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"
#include "runtime/half.h"

namespace weft::gpu_test {
namespace {

// Values in [-1, 1), as float, rounded to `dt` when it is a 16-bit type (so that the CPU's float32
// reference sees exactly the GPU's inputs).
std::vector<float> uniform_values(int64_t n, uint64_t seed, DType dt) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = u(rng);
    if (dt == float16) x = half_to_float(float_to_half(x));
    if (dt == bfloat16) x = bfloat16_to_float(float_to_bfloat16(x));
  }
  return v;
}

Tensor make(DType dt, const Shape& s, const std::vector<float>& v) {
  const size_t n = v.size();
  switch (dt) {
    case DType::Float32: return Tensor::from_host(dt, s, v.data());
    case DType::Float64: {
      std::vector<double> d(v.begin(), v.end());
      return Tensor::from_host(dt, s, d.data());
    }
    case DType::Float16: {
      std::vector<Half> h(n);
      for (size_t i = 0; i < n; ++i) h[i] = float_to_half(v[i]);
      return Tensor::from_host(dt, s, h.data());
    }
    case DType::BFloat16: {
      std::vector<BFloat16> h(n);
      for (size_t i = 0; i < n; ++i) h[i] = float_to_bfloat16(v[i]);
      return Tensor::from_host(dt, s, h.data());
    }
    case DType::Int32: {
      std::vector<int32_t> d(n);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(std::lround(v[i] * 1000));
      return Tensor::from_host(dt, s, d.data());
    }
    case DType::Int64: {
      std::vector<int64_t> d(n);
      for (size_t i = 0; i < n; ++i) d[i] = std::lround(v[i] * 1e6) * 1000003;  // products that wrap
      return Tensor::from_host(dt, s, d.data());
    }
    default: throw InvalidArgument("unexpected dtype");
  }
}

// The CPU reference dtype: 16-bit types are computed in float32 on the CPU.
DType reference_dtype(DType dt) { return dt == float16 || dt == bfloat16 ? float32 : dt; }

double epsilon_of(DType dt) {
  switch (dt) {
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    case DType::Float64: return std::ldexp(1.0, -52);
    default: return std::ldexp(1.0, -23);
  }
}

Tensor abs_of(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[static_cast<size_t>(i)] = std::fabs(element(t, i));
  if (t.dtype() == float64) return Tensor::from_host(float64, t.shape(), v.data());
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_host(float32, t.shape(), f.data());
}

::testing::AssertionResult close(const Tensor& want, const Tensor& got, const Tensor& bound, DType dt, int64_t k) {
  if (want.shape() != got.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << want.shape().to_string() << " vs "
                                         << got.shape().to_string();
  const double eps = epsilon_of(dt);
  const double accumulate = std::ldexp(1.0, dt == float64 ? -52 : -23) * static_cast<double>(k + 2) * 2;
  const double round_out = dt == float16 || dt == bfloat16 ? 2 * eps : 0;
  int64_t bad = 0;
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  for (int64_t i = 0; i < want.size(); ++i) {
    const double x = element(want, i), y = element(got, i), b = element(bound, i);
    if (std::isnan(x) && std::isnan(y)) continue;
    // Plus a few ulps of the result itself: sigmoid and tanh are approximate (1-4 ulp in CUDA's
    // math library), and a 16-bit result is rounded once more after them.
    const double tol = (accumulate + round_out) * b + 8 * eps * std::fabs(x) + 1e-30;
    if (std::fabs(x - y) <= tol) continue;
    if (bad++ < 5) r << "\n  element " << i << ": CPU " << x << ", GPU " << y << " (tolerance " << tol << ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return r << "\n  " << bad << " of " << want.size() << " elements differ";
}

Shape swapped(const Shape& s) {
  std::vector<int64_t> d(s.begin(), s.end());
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return Shape(d);
}

// NumPy's broadcast of the batch dims, then (m, n).
Shape matmul_out(const Shape& a, const Shape& b, bool ta, bool tb) {
  Shape ab(std::span<const int64_t>(a.data(), a.rank() - 2)), bb(std::span<const int64_t>(b.data(), b.rank() - 2));
  Shape out = broadcast(ab, bb);
  out.push_back(ta ? a[a.rank() - 1] : a[a.rank() - 2]);
  out.push_back(tb ? b[b.rank() - 2] : b[b.rank() - 1]);
  return out;
}

struct Product {
  Shape a, b;  // without transposes
};

std::vector<Product> products() {
  return {{Shape{3, 4}, Shape{4, 5}},         {Shape{1, 1}, Shape{1, 1}},        {Shape{1, 7}, Shape{7, 1}},
          {Shape{2, 3, 4}, Shape{4, 5}},      {Shape{2, 3, 4}, Shape{2, 4, 5}},  {Shape{3, 4}, Shape{6, 4, 5}},
          {Shape{2, 1, 3, 4}, Shape{1, 3, 4, 5}}, {Shape{5, 1, 2, 3}, Shape{4, 3, 2}},
          {Shape{3, 0}, Shape{0, 4}},         {Shape{0, 3}, Shape{3, 4}},        {Shape{3, 4}, Shape{4, 0}},
          {Shape{0, 2, 3}, Shape{3, 2}},      {Shape{130, 257}, Shape{257, 67}}, {Shape{4, 33, 65}, Shape{4, 65, 17}},
          {Shape{513, 1024}, Shape{1024, 129}}};
}

void check_matmul(DType dt) {
  uint64_t seed = 1;
  for (const Product& p : products())
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      const Shape as = ta ? swapped(p.a) : p.a, bs = tb ? swapped(p.b) : p.b;
      const Shape os = matmul_out(as, bs, ta, tb);
      const auto av = uniform_values(as.num_elements(), seed++, dt), bv = uniform_values(bs.num_elements(), seed++, dt);
      const Attrs attrs{{"transpose_a", ta}, {"transpose_b", tb}};
      const DType ref = reference_dtype(dt);
      const Tensor want = run_on(*cpu_device(), "MatMul", {make(ref, as, av), make(ref, bs, bv)}, ref, os, attrs);
      const Tensor got = run_on(*gpu(), "MatMul", {make(dt, as, av), make(dt, bs, bv)}, dt, os, attrs);
      const std::string what = std::string(dtype_name(dt)) + " " + as.to_string() + " x " + bs.to_string() +
                               (ta ? " ta" : "") + (tb ? " tb" : "");
      if (dt == int32 || dt == int64) {
        ASSERT_TRUE(same_values(want, got, 0)) << what;
        continue;
      }
      const Tensor bound = run_on(*cpu_device(), "MatMul", {abs_of(make(ref, as, av)), abs_of(make(ref, bs, bv))},
                                  ref, os, attrs);
      const int64_t k = ta ? as[as.rank() - 2] : as[as.rank() - 1];
      ASSERT_TRUE(close(want, got, bound, dt, k)) << what;
    }
}

TEST(CudaMatMul, Float32MatchesCpu) { WEFT_REQUIRE_GPU(); check_matmul(float32); }
TEST(CudaMatMul, Float64MatchesCpu) { WEFT_REQUIRE_GPU(); check_matmul(float64); }
TEST(CudaMatMul, Float16MatchesCpuFloat32) { WEFT_REQUIRE_GPU(); check_matmul(float16); }
TEST(CudaMatMul, BFloat16MatchesCpuFloat32) { WEFT_REQUIRE_GPU(); check_matmul(bfloat16); }
TEST(CudaMatMul, Int32MatchesCpuBitForBit) { WEFT_REQUIRE_GPU(); check_matmul(int32); }
TEST(CudaMatMul, Int64WrapsLikeTheCpu) { WEFT_REQUIRE_GPU(); check_matmul(int64); }

// The second call of a shape takes its plan from the cache; a different shape must not reuse it.
TEST(CudaMatMul, RepeatedAndInterleavedShapesStayCorrect) {
  WEFT_REQUIRE_GPU();
  for (int round = 0; round < 3; ++round)
    for (const Shape& as : {Shape{8, 16}, Shape{16, 8}}) {
      const Shape bs{as[1], 4}, os{as[0], 4};
      const auto av = uniform_values(as.num_elements(), 7, float32), bv = uniform_values(bs.num_elements(), 8, float32);
      const Tensor want = run_on(*cpu_device(), "MatMul", {make(float32, as, av), make(float32, bs, bv)}, float32, os);
      const Tensor got = run_on(*gpu(), "MatMul", {make(float32, as, av), make(float32, bs, bv)}, float32, os);
      const Tensor bound = run_on(*cpu_device(), "MatMul", {abs_of(make(float32, as, av)), abs_of(make(float32, bs, bv))},
                                  float32, os);
      ASSERT_TRUE(close(want, got, bound, float32, as[1])) << as.to_string();
    }
}

void check_fused(DType dt) {
  uint64_t seed = 100;
  struct Fused {
    Shape a, b;
  };
  const std::vector<Fused> cases = {{Shape{3, 4}, Shape{4, 5}},      {Shape{2, 3, 4}, Shape{4, 5}},
                                    {Shape{1, 1}, Shape{1, 1}},      {Shape{3, 0}, Shape{0, 5}},
                                    {Shape{0, 4}, Shape{4, 5}},      {Shape{256, 784}, Shape{784, 128}},
                                    {Shape{5, 7, 33}, Shape{33, 10}}};
  for (const Fused& c : cases)
    for (int flags = 0; flags < 4; ++flags)
      for (const char* act : {"", "relu", "sigmoid", "tanh"}) {
        const bool ta = flags & 1, tb = flags & 2;
        if (ta && c.a.rank() != 2) continue;  // the op refuses transpose_a above rank 2
        const Shape as = ta ? swapped(c.a) : c.a, bs = tb ? swapped(c.b) : c.b;
        const Shape os = matmul_out(c.a, c.b, false, false);
        const int64_t n = os[os.rank() - 1];
        const auto av = uniform_values(as.num_elements(), seed++, dt), bv = uniform_values(bs.num_elements(), seed++, dt);
        const auto biasv = uniform_values(n, seed++, dt);
        const Attrs attrs{{"transpose_a", ta}, {"transpose_b", tb}, {"activation", std::string(act)}};
        const DType ref = reference_dtype(dt);
        const Tensor want = run_on(*cpu_device(), "FusedMatMul",
                                   {make(ref, as, av), make(ref, bs, bv), make(ref, Shape{n}, biasv)}, ref, os, attrs);
        const Tensor got = run_on(*gpu(), "FusedMatMul", {make(dt, as, av), make(dt, bs, bv), make(dt, Shape{n}, biasv)},
                                  dt, os, attrs);
        // |act(x) - act(y)| <= |x - y| for all four activations, so the product's bound (plus the
        // bias) bounds the result; sigmoid and tanh add their own ulps (kApprox-like slack).
        const Attrs plain{{"transpose_a", ta}, {"transpose_b", tb}};
        Tensor bound = run_on(*cpu_device(), "FusedMatMul",
                              {abs_of(make(ref, as, av)), abs_of(make(ref, bs, bv)), abs_of(make(ref, Shape{n}, biasv))},
                              ref, os, plain);
        const int64_t k = ta ? as[0] : as[as.rank() - 1];
        const std::string what = std::string(dtype_name(dt)) + " " + as.to_string() + " x " + bs.to_string() +
                                 (ta ? " ta" : "") + (tb ? " tb" : "") + " activation '" + act + "'";
        ASSERT_TRUE(close(want, got, bound, dt, k + 16)) << what;
      }
}

// "relu_grad" (the fusion pass's MatMul then ReluGrad of a backward pass): on the GPU, the product
// the CUDA MatMul computes (the same cuBLASLt plan: no epilogue) masked as the CUDA ReluGrad
// masks it, bit for bit; x holding NaN, zeros of both signs and negatives.
void check_fused_relu_grad(DType dt) {
  uint64_t seed = 300;
  for (const auto& [as, bs] : std::vector<std::pair<Shape, Shape>>{
           {Shape{3, 4}, Shape{4, 5}}, {Shape{2, 3, 4}, Shape{4, 5}}, {Shape{256, 128}, Shape{128, 128}}, {Shape{3, 0}, Shape{0, 5}}}) {
    const Shape os = matmul_out(as, bs, false, false);
    auto xv = uniform_values(os.num_elements(), seed++, dt);
    const double specials[] = {std::nan(""), 0.0, -0.0, -1.0};
    for (size_t i = 0; i < xv.size(); i += 5) xv[i] = specials[(i / 5) % 4];
    const Tensor a = make(dt, as, uniform_values(as.num_elements(), seed++, dt));
    const Tensor b = make(dt, bs, uniform_values(bs.num_elements(), seed++, dt));
    const Tensor x = make(dt, os, xv);
    const Tensor got = run_on(*gpu(), "FusedMatMul", {a, b, x}, dt, os, {{"activation", std::string("relu_grad")}});
    const Tensor product = run_on(*gpu(), "MatMul", {a, b}, dt, os);
    const Tensor want = run_on(*gpu(), "ReluGrad", {product, x}, dt, os);
    ASSERT_TRUE(same_values(want, got, 0)) << dtype_name(dt) << " " << as.to_string() << " x " << bs.to_string();
  }
}

TEST(CudaFusedMatMul, ReluGradIsTheCudaProductThenTheCudaReluGrad) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {float32, float64, float16, bfloat16}) check_fused_relu_grad(dt);
}

TEST(CudaFusedMatMul, Float32MatchesCpu) { WEFT_REQUIRE_GPU(); check_fused(float32); }
TEST(CudaFusedMatMul, Float64MatchesCpu) { WEFT_REQUIRE_GPU(); check_fused(float64); }
TEST(CudaFusedMatMul, Float16MatchesCpuFloat32) { WEFT_REQUIRE_GPU(); check_fused(float16); }
TEST(CudaFusedMatMul, BFloat16MatchesCpuFloat32) { WEFT_REQUIRE_GPU(); check_fused(bfloat16); }

// relu passes NaN through on the GPU as on the CPU (cuBLASLt's RELU_BIAS epilogue, max(x, 0),
// would make it 0): a NaN bias makes its column NaN, for every float dtype.
TEST(CudaFusedMatMul, ReluPassesANanThroughLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  const std::vector<float> bias = {std::nanf(""), -5.f, 0.5f, 2.f};  // product 3 everywhere
  for (DType dt : {float32, float64, float16, bfloat16}) {
    const std::vector<Tensor> ins = {make(dt, Shape{2, 3}, std::vector<float>(6, 1.f)),
                                     make(dt, Shape{3, 4}, std::vector<float>(12, 1.f)), make(dt, Shape{4}, bias)};
    const Tensor got = run_on(*gpu(), "FusedMatMul", ins, dt, Shape{2, 4}, {{"activation", std::string("relu")}});
    for (int64_t row = 0; row < 2; ++row) {
      EXPECT_TRUE(std::isnan(element(got, row * 4))) << dtype_name(dt) << " row " << row << ": " << element(got, row * 4);
      EXPECT_EQ(element(got, row * 4 + 1), 0.0) << dtype_name(dt);
      EXPECT_EQ(element(got, row * 4 + 2), 3.5) << dtype_name(dt);
      EXPECT_EQ(element(got, row * 4 + 3), 5.0) << dtype_name(dt);
    }
  }
}

TEST(CudaFusedMatMul, RefusesABiasOfTheWrongSizeLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  const auto v = uniform_values(12, 1, float32);
  const std::vector<Tensor> ins = {make(float32, Shape{3, 4}, v), make(float32, Shape{4, 3}, v),
                                   make(float32, Shape{2}, uniform_values(2, 2, float32))};
  for (Device* d : {cpu_device(), gpu()}) {
    try {
      run_on(*d, "FusedMatMul", ins, float32, Shape{3, 3});
      FAIL() << "expected InvalidArgument on " << d->name();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("bias has 2 elements; the output has 3 columns"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(run_on(*gpu(), "FusedMatMul", {ins[0], ins[1], make(float32, Shape{3}, v)}, float32, Shape{3, 3},
                      Attrs{{"activation", std::string("gelu")}}),
               InvalidArgument);
}

// Runs without a GPU: the dtypes claimed in kernels/cuda/matmul.cpp.
TEST(CudaMatMulKernels, Registered) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  const OpDef* mm = op_registry().find("MatMul");
  const OpDef* fused = op_registry().find("FusedMatMul");
  ASSERT_TRUE(mm && fused);
  for (DType dt : {float32, float64, float16, bfloat16, int32, int64})
    EXPECT_TRUE(has_kernel(*mm, DeviceType::CUDA, dt)) << dtype_name(dt);
  for (DType dt : {float32, float64, float16, bfloat16})
    EXPECT_TRUE(has_kernel(*fused, DeviceType::CUDA, dt)) << dtype_name(dt);
  for (DType dt : {int8, uint8, bool_}) EXPECT_FALSE(has_kernel(*mm, DeviceType::CUDA, dt)) << dtype_name(dt);
}

}  // namespace
}  // namespace weft::gpu_test
