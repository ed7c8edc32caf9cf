// CPU kernels of the linalg ops. (Being written; see issue 2.)
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

void register_linalg_kernels() {}

}  // namespace weft::cpu
