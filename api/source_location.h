// SourceLocation: where user code called an op, defaulted at every front-end so that errors in
// graph mode name the user's file:line. Apart from the dispatch funnel (api/dispatch.h) so that
// the ops' public headers need nothing else of it.
#pragma once

#include <source_location>

namespace weft {

using SourceLocation = std::source_location;

}  // namespace weft
