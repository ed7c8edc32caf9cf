// cse: common-subexpression elimination. Two nodes with the same op, the same inputs (in the
// same order, or any order for commutative ops), the same attributes and the same control inputs
// compute the same values; the later one is removed and its readers point at the earlier one.
// Stateful nodes are never merged. Constants with equal values are merged too.
//
//   int merged = eliminate_common_subexpressions(g);
#pragma once

#include "runtime/graph.h"

namespace weft {

int eliminate_common_subexpressions(GraphIR& g);

}  // namespace weft
