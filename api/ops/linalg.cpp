// Front-end of matmul and its gradient.
#include "api/ops/linalg.h"

#include "api/gradient_registry.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, const SourceLocation& loc) {
  static const OpDef& op = op_def("MatMul");
  if (!transpose_a && !transpose_b) return dispatch1(op, {a, b}, {}, loc);
  return dispatch1(op, {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, loc);
}

namespace {

// For C = op(A) op(B): dA and dB are again matmuls, with the transposes arranged so that no
// explicit transpose is materialised. Broadcast batch dims are summed back by unbroadcast.
std::vector<Tensor> matmul_grad(const GradContext& g) {
  const Tensor& a = g.input(0);
  const Tensor& b = g.input(1);
  const Tensor& dc = g.grad();
  bool ta = g.attrs.get_or<bool>("transpose_a", false);
  bool tb = g.attrs.get_or<bool>("transpose_b", false);
  Tensor da, db;
  if (!ta && !tb) {
    da = matmul(dc, b, false, true);
    db = matmul(a, dc, true, false);
  } else if (!ta && tb) {
    da = matmul(dc, b, false, false);
    db = matmul(dc, a, true, false);
  } else if (ta && !tb) {
    da = matmul(b, dc, false, true);
    db = matmul(a, dc, false, false);
  } else {
    da = matmul(b, dc, true, true);
    db = matmul(dc, a, true, true);
  }
  return {unbroadcast(da, a), unbroadcast(db, b)};
}

}  // namespace

void register_linalg_gradients() { register_gradient("MatMul", matmul_grad); }

}  // namespace weft
