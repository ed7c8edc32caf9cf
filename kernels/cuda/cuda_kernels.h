// The CUDA kernel families, one .cu each; register_cuda_kernels (kernels/register_all.h) calls
// them all. Plain C++: included by register_cuda.cpp.
#pragma once

namespace weft::cuda {

void register_unary_kernels();    // unary.cu: Neg Abs Sign Square Exp Log Sqrt Rsqrt Relu Sigmoid Tanh Erf Gelu Sin Cos
void register_binary_kernels();   // binary.cu: Add Sub Mul Div Maximum Minimum Pow ReluGrad
void register_compare_kernels();  // compare.cu: Equal NotEqual Less LessEqual Greater GreaterEqual Select
void register_cast_kernels();     // cast.cu: Cast between all nine dtypes
void register_matmul_kernels();   // matmul.cpp (+ matmul_kernels.cu): MatMul FusedMatMul through cuBLASLt
void register_random_kernels();   // random.cu: RandomUniform RandomNormal (the CPU's Philox streams)
void register_training_kernels(); // training.cu: ApplyGradientDescent ApplyMomentum ApplyAdam ApplyAdamW GlobalSquaredNorm
void register_transpose_kernels();  // transpose.cu: Transpose
void register_array_kernels();      // array.cu: ConcatV2 Slice GatherV2 OneHot
void register_pad_kernels();        // pad.cu: Pad
void register_scatter_kernels();    // scatter.cu: UnsortedSegmentSum
void register_creation_kernels();   // creation.cu: Fill Range BroadcastTo BroadcastLike Size
void register_variable_kernels();   // variables.cu: Const NoOp ReadVariable(ForUpdate) Assign(Add|Sub)Variable
void register_reduce_kernels();   // reduce.cu: Sum Mean Max Min ArgMax
void register_softmax_kernels();  // softmax.cu: Softmax LogSoftmax SparseSoftmaxCrossEntropyWithLogits
void register_fused_kernels();    // fused.cu: FusedElementwise
void register_collective_kernels();  // collective.cpp: CollectiveAllReduce/Broadcast/AllGather through NCCL
void register_conv_kernels();         // conv.cpp: Conv2D Conv2DBackpropInput Conv2DBackpropFilter (cuDNN)
void register_pooling_kernels();     // pooling.cu: MaxPool AvgPool MaxPoolGrad MaxPoolGradGrad AvgPoolGrad
void register_normalization_kernels();  // normalization.cu: FusedBatchNorm(Grad) LayerNorm(Grad)
void register_attention_kernels();      // attention.cu: ScaledDotProductAttention(Grad)

}  // namespace weft::cuda
