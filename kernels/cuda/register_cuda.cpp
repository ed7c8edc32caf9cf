#include "kernels/cuda/cuda_kernels.h"
#include "kernels/register_all.h"

namespace weft::cuda {

void register_cuda_kernels() {
  register_unary_kernels();
  register_binary_kernels();
  register_compare_kernels();
  register_cast_kernels();
  register_reduce_kernels();
  register_softmax_kernels();
  register_fused_kernels();
}

}  // namespace weft::cuda
