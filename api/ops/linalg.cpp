// Front-ends of the linalg ops. (Being written; see issue 2.)
#include "api/ops/linalg.h"

namespace weft {}  // namespace weft
