// Front-ends of the random ops. (Being written; see issue 2.)
#include "api/ops/random.h"

namespace weft {}  // namespace weft
