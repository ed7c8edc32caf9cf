// Front-ends of the array ops. (Being written; see issue 2.)
#include "api/ops/array.h"

namespace weft {}  // namespace weft
