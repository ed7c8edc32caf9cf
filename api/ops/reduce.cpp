// Front-ends of the reduce ops. (Being written; see issue 2.)
#include "api/ops/reduce.h"

namespace weft {}  // namespace weft
