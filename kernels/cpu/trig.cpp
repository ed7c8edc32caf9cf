// CPU kernels of Sin and Cos: libm's, one call per element (glibc's sin and cos are correctly
// rounded in practice, within one ulp by their documentation); SinOp and CosOp are in
// elementwise_ops.h with the other elementwise ops' functions.
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/register_all.h"

namespace weft::cpu {

void register_trig_kernels() {
  register_float<SinOp>("Sin");
  register_float<CosOp>("Cos");
}

}  // namespace weft::cpu
