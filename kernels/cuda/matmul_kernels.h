// The CUDA kernels MatMul and FusedMatMul need besides cuBLASLt (matmul_kernels.cu): the bias and
// activation epilogues cuBLASLt cannot express, and the integer GEMM (cuBLASLt has none for int32
// x int32 -> int32 with wrap-around). Plain C++ declarations: matmul.cpp includes them.
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

// C = op(A) op(B) for int32 / int64 with the CPU kernel's wrap-around, every run of g.
void launch_integer_gemm(DType dtype, const GemmGeometry& g, const void* a, const void* b, void* c,
                         cudaStream_t stream);

}  // namespace weft::cuda
