// The CUDA kernel families, one .cu each; register_cuda_kernels (kernels/register_all.h) calls
// them all. Plain C++: included by register_cuda.cpp.
#pragma once

namespace weft::cuda {

void register_unary_kernels();    // unary.cu: Neg Abs Sign Square Exp Log Sqrt Rsqrt Relu Sigmoid Tanh
void register_binary_kernels();   // binary.cu: Add Sub Mul Div Maximum Minimum Pow ReluGrad
void register_compare_kernels();  // compare.cu: Equal NotEqual Less LessEqual Greater GreaterEqual Select
void register_cast_kernels();     // cast.cu: Cast between all nine dtypes
void register_reduce_kernels();   // reduce.cu: Sum Mean Max Min ArgMax
void register_softmax_kernels();  // softmax.cu: Softmax LogSoftmax SparseSoftmaxCrossEntropyWithLogits
void register_fused_kernels();    // fused.cu: FusedElementwise

}  // namespace weft::cuda
