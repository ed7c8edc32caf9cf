// Built without CUDA: there are no GPU kernels to register.
#include "kernels/register_all.h"

namespace weft::cuda {
void register_cuda_kernels() {}
}  // namespace weft::cuda
