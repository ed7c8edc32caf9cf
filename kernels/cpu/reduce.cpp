// CPU kernels of the reduce ops. (Being written; see issue 2.)
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

void register_reduce_kernels() {}

}  // namespace weft::cpu
