// Gradient functions: one per differentiable op, written with front-end ops in
// api/ops/<family>.cpp beside the op's front-end, so the same code runs eagerly, under an outer
// tape (higher-order gradients) and, later, traced into a graph.
//
//   std::vector<Tensor> mul_grad(const GradContext& g) {
//     return {unbroadcast(g.grad(0) * g.input(1), g.input(0)), unbroadcast(g.grad(0) * g.input(0), g.input(1))};
//   }
//   register_gradient("Mul", mul_grad);
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {

struct GradContext {
  const OpDef& op;
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  std::span<const Tensor> output_grads;  // one per output; zeros where no gradient arrived
  const Attrs& attrs;
  // Whether the tape wants input i's gradient (it is watched or derived from something
  // watched); a gradient function may skip work for the others and return an undefined Tensor.
  std::span<const bool> wanted = {};
  // Which outputs a gradient reached (output_grads holds zeros for the others); empty: all of
  // them. Lets an op skip work for an output only higher-order gradients ever reach.
  std::span<const bool> arrived = {};

  bool has_grad(int i) const { return arrived.empty() || arrived[static_cast<size_t>(i)]; }

  bool needs(int i) const { return wanted.empty() || wanted[static_cast<size_t>(i)]; }
  const Tensor& input(int i) const { return inputs[i]; }
  const Tensor& output(int i) const { return outputs[i]; }
  const Tensor& grad(int i = 0) const { return output_grads[i]; }
};

// Returns one gradient per input; an undefined Tensor means "no gradient" (integer inputs,
// indices, ...).
using GradFn = std::vector<Tensor> (*)(const GradContext&);

void register_gradient(std::string_view op, GradFn fn);
// Null when the op has no registered gradient.
GradFn find_gradient(const OpDef& op);
// Registers the gradients of every built-in op, once.
void register_builtin_gradients();

// Sums `grad` over the dims that broadcasting added or stretched, so it has `like`'s shape.
Tensor unbroadcast(const Tensor& grad, const Tensor& like);

}  // namespace weft
