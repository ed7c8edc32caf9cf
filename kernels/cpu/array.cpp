// CPU kernels of the array ops. (Being written; see issue 2.)
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

void register_array_kernels() {}

}  // namespace weft::cpu
