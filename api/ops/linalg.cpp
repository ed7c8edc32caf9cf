// Front-end of matmul and its gradient.
#include "api/ops/linalg.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"
#include "api/ops/register_gradients.h"

namespace weft {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, const SourceLocation& loc) {
  static const OpDef& op = op_def("MatMul");
  if (!transpose_a && !transpose_b) return dispatch1(op, {a, b}, {}, loc);
  return dispatch1(op, {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, loc);
}

namespace {

// For C = op(A) op(B): dA and dB are again matmuls, with the transposes arranged so that no
// explicit transpose is materialised. Broadcast batch dims are summed back by unbroadcast, except
// for the common case of a batch of A's times a matrix B (Dense on the last axis): there dB sums
// over all of A's rows, which is one GEMM of A and dC viewed as matrices, [K, B*M] x [B*M, N],
// rather than B products summed afterwards.
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
    if (!ta) da = matmul(dc, b, false, !tb);  // [..., M, N] x matrix: one GEMM in the kernel
    else da = matmul(b, dc, tb, true);
    da = unbroadcast(da, a);
  }
  if (g.needs(1)) {
    const Shape& as = a.shape();
    const Shape& cs = dc.shape();
    const int64_t k = as[as.rank() - 1], n = cs[cs.rank() - 1];
    if (as.rank() > 2 && b.shape().rank() == 2 && !ta && k >= 0 && n >= 0) {
      const Tensor rows_a = reshape(a, {-1, k}), rows_dc = reshape(dc, {-1, n});
      db = tb ? matmul(rows_dc, rows_a, true, false) : matmul(rows_a, rows_dc, true, false);
    } else {
      if (!tb) db = matmul(a, dc, !ta, false);
      else db = matmul(dc, a, true, ta);
      db = unbroadcast(db, b);
    }
  }
  return {da, db};
}

}  // namespace

void register_linalg_gradients() { register_gradient("MatMul", matmul_grad); }

}  // namespace weft
