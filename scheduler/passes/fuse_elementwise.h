// fuse_elementwise: turns chains of elementwise ops into single nodes that make one pass over
// memory. relu(a + b) becomes one FusedElementwise node instead of an Add writing a temporary and
// a Relu reading it back; relu(matmul(x, w) + bias) becomes one FusedMatMul whose epilogue adds
// the bias and applies the activation while the GEMM's output is still in cache; on CPUs
// relu(batch_norm(x)) is one FusedBatchNorm, and the ReluGrad of a relu's gradient is read
// inside the FusedBatchNormGrad or MaxPoolGrad next to it.
//
//   int fused = fuse_elementwise(g);   // nodes removed by fusion
#pragma once

#include "runtime/graph.h"

namespace weft {

// cpu_only_fusions: also fold a relu into a FusedBatchNorm and a ReluGrad into the batch norm's or
// max pooling's gradient, which only the CPU kernels take (the CUDA ones refuse the attribute):
// for a graph no GPU will run.
int fuse_elementwise(GraphIR& g, bool cpu_only_fusions = true);

}  // namespace weft
