// The CUDA ScaledDotProductAttention, its gradient and AttentionDropoutMask
// (kernels/cuda/attention.cu) against the CPU kernels: causal with Sq = Sk, Sq < Sk and Sq > Sk
// (rows that see no key), a broadcast boolean mask, no mask, dropout by seed, sequences longer
// than the CPU's tiles; float32, float64, and the 16-bit types computed in float. Each device sums
// in its own order, so the results agree within a few roundings; the dropout mask is the same
// bits. float16 and bfloat16 calls that cuDNN's fused attention computes exactly as weft defines
// the op go to it (kernels/cuda/attention_cudnn.h): the cases above include some, and a test of
// nanoGPT-sized problems checks that the fused path is taken. Skipped without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/attention_cudnn.h"

namespace weft::gpu_test {
namespace {

struct Case {
  int64_t b, h, sq, sk, d, dv;
  bool causal;
  bool masked;
  double dropout;
};

std::string describe(const Case& c, DType dt) {
  return std::string(dtype_name(dt)) + " [" + std::to_string(c.b) + "," + std::to_string(c.h) + "] Sq " +
         std::to_string(c.sq) + " Sk " + std::to_string(c.sk) + " D " + std::to_string(c.d) + " Dv " +
         std::to_string(c.dv) + (c.causal ? " causal" : "") + (c.masked ? " masked" : "") + " dropout " +
         std::to_string(c.dropout);
}

// A [B, 1, Sq, Sk] mask that hides about a third of the keys, and all of row 1's.
Tensor mask_for(const Case& c) {
  const int64_t n = c.b * c.sq * c.sk;
  std::unique_ptr<bool[]> keep(new bool[static_cast<size_t>(n)]);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t i = (e / c.sk) % c.sq, j = e % c.sk;
    keep[e] = i != 1 && (i + 2 * j) % 3 != 1;
  }
  return Tensor::from_host(DType::Bool, Shape{c.b, 1, c.sq, c.sk}, keep.get());
}

// q, k, v and the output's gradient, uniform in [-1, 1], from seeds `seed` to `seed + 3`.
std::array<Tensor, 4> operands(const Case& c, DType dt, uint64_t seed) {
  return {uniform(dt, Shape{c.b, c.h, c.sq, c.d}, seed, -1, 1), uniform(dt, Shape{c.b, c.h, c.sk, c.d}, seed + 1, -1, 1),
          uniform(dt, Shape{c.b, c.h, c.sk, c.dv}, seed + 2, -1, 1),
          uniform(dt, Shape{c.b, c.h, c.sq, c.dv}, seed + 3, -1, 1)};
}

Tensor seed_tensor(int64_t seed) { return Tensor::from_host(DType::Int64, Shape{}, &seed); }

double tolerance(DType d) {
  switch (d) {
    case DType::Float64: return 1e-10;
    case DType::Float32: return 1e-4;
    case DType::Float16: return 1.0 / (1 << 7);
    default: return 1.0 / (1 << 4);
  }
}

TEST(AttentionGpu, ForwardAndGradientMatchTheCpu) {
  WEFT_REQUIRE_GPU();
  const Case cases[] = {{2, 3, 17, 17, 8, 8, true, false, 0},     {1, 2, 5, 23, 16, 4, true, false, 0},
                        {1, 2, 9, 4, 8, 8, true, false, 0},       {2, 2, 7, 11, 8, 6, false, true, 0},
                        {2, 1, 6, 6, 4, 4, true, true, 0},        {1, 2, 10, 10, 8, 8, false, false, 0},
                        {2, 2, 16, 16, 8, 8, true, false, 0.25},  {1, 1, 150, 300, 32, 32, true, false, 0},
                        {1, 2, 70, 140, 16, 16, false, true, 0.1}};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (const Case& c : cases) {
      const std::string what = describe(c, dt);
      const auto [q, k, v, dout] = operands(c, dt, 1);
      const Attrs attrs{{"scale", 0.35}, {"causal", c.causal}, {"has_mask", c.masked}, {"dropout", c.dropout}};
      std::vector<Tensor> extra;
      if (c.masked) extra.push_back(mask_for(c));
      if (c.dropout > 0) extra.push_back(seed_tensor(17));
      std::vector<Tensor> in = {q, k, v};
      in.insert(in.end(), extra.begin(), extra.end());
      const std::vector<Tensor> want = run_all(*cpu_device(), "ScaledDotProductAttention", in, attrs);
      const std::vector<Tensor> got = run_all(*gpu(), "ScaledDotProductAttention", in, attrs);
      const double tol = tolerance(dt), stats = dt == DType::Float64 ? 1e-10 : 1e-4;
      EXPECT_TRUE(close(want[0], got[0], tol, tol)) << "out " << what;
      EXPECT_TRUE(close(want[1], got[1], stats, stats)) << "lse " << what;
      // The gradient from the same forward (the CPU's) on both devices.
      std::vector<Tensor> gin = {dout, q, k, v, want[0], want[1]};
      gin.insert(gin.end(), extra.begin(), extra.end());
      const std::vector<Tensor> gw = run_all(*cpu_device(), "ScaledDotProductAttentionGrad", gin, attrs);
      const std::vector<Tensor> gg = run_all(*gpu(), "ScaledDotProductAttentionGrad", gin, attrs);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(gw[i], gg[i], 4 * tol, 4 * tol)) << "gradient " << i << " " << what;
    }
}

// Problems of a GPT's shape (head dimension 64, causal, Sq = Sk and a query block after a cache):
// cuDNN takes the forward and the gradient of each, and they agree with the CPU's.
TEST(AttentionGpu, SixteenBitAttentionRunsCudnnsFusedKernels) {
  WEFT_REQUIRE_GPU();
  const Case cases[] = {{2, 6, 256, 256, 64, 64, true, false, 0},
                        {1, 4, 64, 192, 64, 64, true, false, 0},
                        {2, 2, 128, 128, 64, 64, false, false, 0}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Case& c : cases) {
      const std::string what = describe(c, dt);
      const auto [q, k, v, dout] = operands(c, dt, 5);
      const Attrs attrs{{"scale", 0.125}, {"causal", c.causal}, {"has_mask", false}, {"dropout", 0.0}};
      const int64_t before = cuda::cudnn_attention_calls();
      const std::vector<Tensor> want = run_all(*cpu_device(), "ScaledDotProductAttention", {q, k, v}, attrs);
      const std::vector<Tensor> got = run_all(*gpu(), "ScaledDotProductAttention", {q, k, v}, attrs);
      const std::vector<Tensor> gw =
          run_all(*cpu_device(), "ScaledDotProductAttentionGrad", {dout, q, k, v, want[0], want[1]}, attrs);
      const std::vector<Tensor> gg =
          run_all(*gpu(), "ScaledDotProductAttentionGrad", {dout, q, k, v, got[0], got[1]}, attrs);
      EXPECT_EQ(cuda::cudnn_attention_calls() - before, 2) << "cuDNN did not take both passes of " << what << "; its last refusal: " << cuda::cudnn_attention_refusal();
      const double tol = tolerance(dt);
      EXPECT_TRUE(close(want[0], got[0], tol, tol)) << "out " << what;
      EXPECT_TRUE(close(want[1], got[1], 1e-4, 1e-4)) << "lse " << what;
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(gw[i], gg[i], 4 * tol, 4 * tol)) << "gradient " << i << " " << what;
    }
}

TEST(AttentionGpu, DropoutMaskIsTheCpusBits) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (double rate : {0.1, 0.5}) {
      const Tensor q = uniform(dt, Shape{2, 3, 37, 8}, 1, -1, 1), k = uniform(dt, Shape{2, 3, 130, 8}, 2, -1, 1);
      expect_same_bits("AttentionDropoutMask", {q, k, seed_tensor(123)}, dt, Shape{2, 3, 37, 130},
                       {{"dropout", rate}}, std::string(dtype_name(dt)) + " rate " + std::to_string(rate));
    }
}

TEST(AttentionGpu, EveryCpuDtypeHasAKernel) {
  register_builtin_ops();
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  for (const char* name : {"ScaledDotProductAttention", "ScaledDotProductAttentionGrad"})
    for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
      EXPECT_TRUE(has_kernel(op_registry().get(name), DeviceType::CUDA, d)) << name << " " << dtype_name(d);
  for (DType d : {DType::Float32, DType::Float64})
    EXPECT_TRUE(has_kernel(op_registry().get("AttentionDropoutMask"), DeviceType::CUDA, d)) << dtype_name(d);
}

}  // namespace
}  // namespace weft::gpu_test
