// The instruction-set variants of vector_math.h, one file each; vector_math.cpp picks one.
#pragma once

#include "kernels/cpu/vector_math.h"

namespace weft::cpu {

const VectorMathTable* vector_math_scalar();
// These two may only run on a CPU with their instruction set.
const VectorMathTable* vector_math_avx2();
const VectorMathTable* vector_math_avx512();

}  // namespace weft::cpu
