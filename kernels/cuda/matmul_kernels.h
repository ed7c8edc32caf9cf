// The CUDA kernels MatMul and FusedMatMul need besides cuBLASLt (matmul_kernels.cu): the bias and
// activation epilogues cuBLASLt cannot express, and a plain GEMM for integers (cuBLASLt has none
// for int32 x int32 -> int32 with wrap-around) and for the rare float problem for which cuBLASLt's
// heuristic offers no algorithm. Plain C++ declarations: matmul.cpp includes them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/matmul_geometry.h"
#include "runtime/dtype.h"

namespace weft::cuda {

enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };

// c[r * n + j] = act(c[r * n + j] + bias[j]) over rows x n, or act(c[...]) when bias is null, for
// float32, float64, float16 and bfloat16 (the last two computed in float, as the CPU would after
// a cast). The same expressions as the CPU's FusedMatMul epilogue (kernels/cpu/fused.cpp).
void launch_bias_activation(DType dtype, void* c, const void* bias, int64_t rows, int64_t n, Activation act,
                            cudaStream_t stream);

// c[i] = x[i] > 0 ? c[i] : 0 over `total` elements (FusedMatMul's "relu_grad": ReluGrad(C, x), the
// expression of the CUDA ReluGrad kernel), for the same dtypes.
void launch_relu_grad_mask(DType dtype, void* c, const void* x, int64_t total, cudaStream_t stream);

// C = op(A) op(B) for one run of g, one thread per element: int32 / int64 with the CPU kernel's
// wrap-around, float32 / float64 in their own type, float16 / bfloat16 accumulated in float.
void launch_plain_gemm(DType dtype, const GemmGeometry& g, const GemmRun& run, const void* a, const void* b, void* c,
                       cudaStream_t stream);

}  // namespace weft::cuda
