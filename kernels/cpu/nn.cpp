// CPU kernels of the nn ops. (Being written; see issue 2.)
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

void register_nn_kernels() {}

}  // namespace weft::cpu
