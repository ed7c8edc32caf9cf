// An attribute's value as people read it: 3, 0.001, true, float32, (2, 3), [1, 1], "SAME", a
// tensor's dtype and shape, <graph>. For tools (weft-inspect) and messages; not a serialisation.
#pragma once

#include <string>

#include "runtime/attr.h"

namespace weft {

std::string attr_text(const AttrValue& v);

}  // namespace weft
