#include "kernels/cuda/cuda_kernels.h"
#include "kernels/register_all.h"

namespace weft::cuda {

void register_cuda_kernels() {
  register_unary_kernels();
  register_binary_kernels();
  register_compare_kernels();
  register_cast_kernels();
  register_matmul_kernels();
  register_random_kernels();
  register_training_kernels();
  register_transpose_kernels();
  register_array_kernels();
  register_pad_kernels();
  register_scatter_kernels();
  register_creation_kernels();
  register_variable_kernels();
  register_reduce_kernels();
  register_softmax_kernels();
  register_fused_kernels();
  register_collective_kernels();
  register_conv_kernels();
  register_pooling_kernels();
  register_normalization_kernels();
  register_attention_kernels();
}

}  // namespace weft::cuda
