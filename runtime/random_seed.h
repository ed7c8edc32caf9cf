// The process-wide sequence unseeded random ops draw their seeds from. An op with seed -1 takes
// the next seed when its kernel runs, so an unseeded op in a traced graph gives new numbers on
// every call (as TensorFlow's stateful random ops do), while an explicit seed gives the same
// numbers in every mode.
#pragma once

#include <cstdint>

namespace weft {

// `seed` itself when >= 0, else the next seed of the sequence.
int64_t resolve_seed(int64_t seed);
// Restarts the sequence: the unseeded draws that follow are reproducible.
void set_global_seed(int64_t seed);

}  // namespace weft
