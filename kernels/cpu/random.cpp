// CPU kernels of the random ops. (Being written; see issue 2.)
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

void register_random_kernels() {}

}  // namespace weft::cpu
