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
  // Each product is only formed when wanted: the first layer's input needs no gradient, and
  // skipping it saves a quarter of an MLP's backward FLOPs.
  Tensor da, db;
  if (g.needs(0)) {
    if (!ta) da = matmul(dc, b, false, !tb);
    else da = matmul(b, dc, tb, true);
    da = unbroadcast(da, a);
  }
  if (g.needs(1)) {
    if (!tb) db = matmul(a, dc, !ta, false);
    else db = matmul(dc, a, true, ta);
    db = unbroadcast(db, b);
  }
  return {da, db};
}

}  // namespace

void register_linalg_gradients() { register_gradient("MatMul", matmul_grad); }

}  // namespace weft
