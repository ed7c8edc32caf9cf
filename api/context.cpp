#include "api/context.h"

namespace weft {

EagerContext& eager_context() {
  thread_local EagerContext ctx;
  return ctx;
}

}  // namespace weft
