// The CUDA LayerNorm and LayerNormGrad (kernels/cuda/normalization.cu) against the CPU kernels:
// rows short (a warp each) and long (a block each), one element long, several normalised axes,
// more rows than one chunk of the column sums, no rows; float32, float64, and the 16-bit types
// with float32 statistics. The sums run in another order on each device, so the results agree
// within a few roundings, not bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/half.h"

namespace weft::gpu_test {
namespace {

// Relative tolerance of y and dx: a few roundings of the dtype (one 16-bit rounding apart at most).
double tolerance(DType d) {
  switch (d) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 1.0 / (1 << 9);
    default: return 1.0 / (1 << 6);
  }
}

TEST(LayerNormGpu, MatchesTheCpu) {
  WEFT_REQUIRE_GPU();
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{7, 33}, -1},     {{300, 512}, -1}, {{5, 513}, -1},  {{3, 70000}, -1},
                        {{9, 1}, -1},      {{1, 1}, -1},     {{4, 6, 10}, 1}, {{5000, 24}, -1},
                        {{2, 3, 4}, 0},    {{0, 8}, -1}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (const Case& c : cases) {
      const std::string what = std::string(dtype_name(dtype)) + " " + c.shape.to_string();
      const DType p = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
      const int64_t axis = c.axis < 0 ? c.axis + c.shape.rank() : c.axis;
      Shape ns;
      for (int64_t i = axis; i < c.shape.rank(); ++i) ns.push_back(c.shape[i]);
      // Rows away from zero, so the statistics' one pass is exercised as on the CPU.
      const Tensor x = uniform(dtype, c.shape, 1, 2, 9), dy = uniform(dtype, c.shape, 2, -1, 1);
      const Tensor g = uniform(p, ns, 3, 0.5, 2), b = uniform(p, ns, 4, -1, 1);
      const Attrs attrs{{"axis", c.axis}, {"epsilon", 1e-5}};
      const std::vector<Tensor> want = run_all(*cpu_device(), "LayerNorm", {x, g, b}, attrs);
      const std::vector<Tensor> got = run_all(*gpu(), "LayerNorm", {x, g, b}, attrs);
      const double tol = tolerance(dtype), ptol = dtype == DType::Float64 ? 1e-12 : 1e-6;
      EXPECT_TRUE(close(want[0], got[0], tol, tol)) << "y " << what;
      EXPECT_TRUE(close(want[1], got[1], ptol, 0)) << "mean " << what;
      EXPECT_TRUE(close(want[2], got[2], ptol, 0)) << "rstd " << what;
      // The gradient from the same statistics (the CPU's) on both devices.
      const std::vector<Tensor> gw = run_all(*cpu_device(), "LayerNormGrad", {dy, x, g, want[1], want[2]}, attrs);
      const std::vector<Tensor> gg = run_all(*gpu(), "LayerNormGrad", {dy, x, g, want[1], want[2]}, attrs);
      // dx cancels (g - mean(g) - xhat * mean(g * xhat)): an absolute floor of the same size.
      EXPECT_TRUE(close(gw[0], gg[0], 10 * tol, 10 * tol)) << "dx " << what;
      EXPECT_TRUE(close(gw[1], gg[1], ptol, ptol)) << "dgamma " << what;
      EXPECT_TRUE(close(gw[2], gg[2], ptol, ptol)) << "dbeta " << what;
    }
}

TEST(LayerNormGpu, EveryCpuDtypeHasAKernel) {
  register_builtin_ops();
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  for (const char* name : {"LayerNorm", "LayerNormGrad"})
    for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
      EXPECT_TRUE(has_kernel(op_registry().get(name), DeviceType::CUDA, d)) << name << " " << dtype_name(d);
}

}  // namespace
}  // namespace weft::gpu_test
