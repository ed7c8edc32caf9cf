// The CUDA kernel families, one .cu each; register_cuda_kernels (kernels/register_all.h) calls
// them all. Plain C++: included by register_cuda.cpp.
#pragma once

namespace weft::cuda {

void register_unary_kernels();    // unary.cu: Neg Abs Sign Square Exp Log Sqrt Rsqrt Relu Sigmoid Tanh
void register_binary_kernels();   // binary.cu: Add Sub Mul Div Maximum Minimum Pow ReluGrad
void register_compare_kernels();  // compare.cu: Equal NotEqual Less LessEqual Greater GreaterEqual Select
void register_cast_kernels();     // cast.cu: Cast between all nine dtypes
void register_matmul_kernels();   // matmul.cpp (+ matmul_kernels.cu): MatMul FusedMatMul through cuBLASLt
void register_random_kernels();   // random.cu: RandomUniform RandomNormal (the CPU's Philox streams)
void register_training_kernels(); // training.cu: ApplyGradientDescent ApplyMomentum ApplyAdam
void register_collective_kernels();  // collective.cpp: CollectiveAllReduce/Broadcast/AllGather through NCCL

}  // namespace weft::cuda
