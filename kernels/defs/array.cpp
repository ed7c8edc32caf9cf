// Definitions of the array ops. (Being written; see issue 2.)
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

void register_array_defs() {}

}  // namespace weft::defs
