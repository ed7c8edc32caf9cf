// Front-ends of the nn ops. (Being written; see issue 2.)
#include "api/ops/nn.h"

namespace weft {}  // namespace weft
