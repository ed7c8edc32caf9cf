// Definitions of the reduce ops. (Being written; see issue 2.)
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

void register_reduce_defs() {}

}  // namespace weft::defs
