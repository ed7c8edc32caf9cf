// constant_fold: evaluates, once, every node whose inputs are all constants and replaces it with
// a Const node holding the result. Stateful ops (random, variable reads, print) are never folded,
// nor are results larger than `max_bytes` (folding would trade a cheap op for a big constant).
//
//   int folded = constant_fold(g);
#pragma once

#include <cstddef>

#include "runtime/graph.h"

namespace weft {

int constant_fold(GraphIR& g, size_t max_bytes = size_t{10} << 20);

}  // namespace weft
