// The registry's elementwise ops, found from their definitions instead of listed by hand: every op
// flagged kElementwise that takes a fixed one or two tensors and no attributes (Select, Cast and
// FusedElementwise, which take a condition, a dtype or a program, have tests of their own). The
// suites that run every elementwise op iterate this list, so an op added to kernels/defs is tested
// by them without a line of test; an op that needs other inputs than their defaults says so in the
// suite's table of exceptions (a divisor without zeros, a tolerance), by name.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/error.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft::test_ops {

struct ElementwiseOp {
  const OpDef* def;
  int arity;
  bool broadcasts;   // operands of different shapes broadcast (ReluGrad's must be equal)
  bool bool_output;  // a comparison
};
// Names the op in test listings (else gtest prints the struct's bytes).
inline void PrintTo(const ElementwiseOp& op, std::ostream* os) { *os << op.def->name; }

namespace detail {
// Whether the definition accepts float32 operands of `shapes`, and the output dtype it gives.
inline bool infers(const OpDef& op, const std::vector<Shape>& shapes, DType* out = nullptr) {
  std::vector<Tensor> in;
  for (const Shape& s : shapes) in.push_back(Tensor::empty(float32, s));
  const Attrs none;
  InferContext ctx(op, in, none);
  try {
    op.infer(ctx);
  } catch (const InvalidArgument&) {
    return false;
  }
  if (out) *out = ctx.output(0).dtype;
  return true;
}
}  // namespace detail

// In registration order, which is the order of kernels/defs.
inline std::vector<ElementwiseOp> elementwise_ops() {
  register_builtin_ops();
  std::vector<ElementwiseOp> ops;
  for (const OpDef* op : op_registry().all()) {
    const int n = op->min_inputs;
    if (!op->has(kElementwise) || n != op->max_inputs || n < 1 || n > 2 || !op->attrs.empty() ||
        op->num_outputs != 1)
      continue;
    DType out = float32;
    if (!detail::infers(*op, std::vector<Shape>(static_cast<size_t>(n), Shape{3}), &out)) continue;  // not a float op
    const bool broadcasts = n == 1 || detail::infers(*op, {Shape{3, 1}, Shape{1, 4}});
    ops.push_back({op, n, broadcasts, out == DType::Bool});
  }
  return ops;
}

inline std::vector<ElementwiseOp> elementwise_ops(int arity) {
  std::vector<ElementwiseOp> out;
  for (const ElementwiseOp& op : elementwise_ops())
    if (op.arity == arity) out.push_back(op);
  return out;
}

}  // namespace weft::test_ops
