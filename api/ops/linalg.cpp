// Front-end of matmul. Its gradient will sit beside it here.
#include "api/ops/linalg.h"

namespace weft {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, const SourceLocation& loc) {
  static const OpDef& op = op_def("MatMul");
  if (!transpose_a && !transpose_b) return dispatch1(op, {a, b}, {}, loc);
  return dispatch1(op, {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, loc);
}

}  // namespace weft
