#include "scheduler/passes/constant_fold.h"

#include <optional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/kernel_registry.h"

namespace weft {

namespace {

// The value of every output of each node known to be constant: a Const's value, or what a folded
// node computed. Indexed by node id; empty for the others.
using Known = std::vector<std::vector<Tensor>>;

const std::vector<Tensor>* known(const Known& values, int32_t id) {
  const std::vector<Tensor>& v = values[static_cast<size_t>(id)];
  return v.empty() ? nullptr : &v;
}

// Whether the node may be replaced by its value: a pure function of constant inputs.
bool foldable(const Known& values, const Node& n) {
  const OpDef& op = *n.op;
  // Stateful ops give another value on each run (random, reads); side effects must happen at run
  // time. A node without inputs (Const itself, Fill from attributes) gains nothing from folding.
  if (op.has(kStateful) || op.has(kSideEffect) || n.inputs.empty() || n.outputs.empty()) return false;
  for (const Endpoint& e : n.inputs)
    if (!known(values, e.node)) return false;
  // A control input orders the node after something that may change state; only waiting on a
  // constant is meaningless and can be dropped.
  for (int32_t c : n.control_inputs)
    if (!known(values, c)) return false;
  return true;
}

size_t bytes_of(const TensorMeta& m) {
  const int64_t elements = m.shape.num_elements();
  return elements < 0 ? 0 : static_cast<size_t>(elements) * dtype_size(m.dtype);
}

// Runs the node's CPU kernel on its constant inputs, as eager dispatch would; nullopt when the
// node cannot be evaluated here or its kernel fails. A failure is not an error of the pass: the
// node stays, so the error is raised at run time naming the node, as without folding.
std::optional<std::vector<Tensor>> evaluate(const Known& values, const Node& n) {
  const OpDef& op = *n.op;
  std::vector<Tensor> inputs;
  inputs.reserve(n.inputs.size());
  for (const Endpoint& e : n.inputs) inputs.push_back((*known(values, e.node))[static_cast<size_t>(e.index)]);
  const DType kernel_dtype = kernel_dtype_of(
      op, static_cast<int>(inputs.size()), [&](int i) { return inputs[static_cast<size_t>(i)].dtype(); },
      n.outputs[0].dtype);
  const KernelRef kernel = find_kernels(op, DeviceType::CPU, kernel_dtype);
  if (kernel.async || (!kernel.sync && !op.has(kForwardsInput))) return std::nullopt;
  // A constant placed on a GPU would need a copy to the host first; such graphs are rare enough
  // that folding them is not worth the transfer here.
  for (const Tensor& t : inputs)
    if (t.is_symbolic() || !t.device_ptr() || t.device_ptr()->type() != DeviceType::CPU) return std::nullopt;

  std::vector<Tensor> outputs(n.outputs.size());
  try {
    // Inference on the concrete inputs gives exact shapes and validates what the kernel assumes.
    InferContext ic(op, inputs, n.attrs);
    op.infer(ic);
    if (ic.num_outputs() != static_cast<int>(outputs.size())) return std::nullopt;
    // No RunContext: an op that needs one (a subgraph call) fails here and is left unfolded.
    run_kernel(op, kernel.sync, *cpu_device(), n.attrs, inputs, outputs,
               [&](size_t i) -> const TensorMeta& { return ic.output(static_cast<int>(i)); });
  } catch (...) {
    return std::nullopt;
  }
  // The readers were built against the declared metas: a value that contradicts them (an infer
  // function out of step with its kernel) must not be swapped in.
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    const TensorMeta& declared = n.outputs[i];
    if (!t.defined() || t.is_symbolic() || t.dtype() != declared.dtype || t.rank() != declared.shape.rank())
      return std::nullopt;
    for (int64_t d = 0; d < t.rank(); ++d)
      if (declared.shape[d] >= 0 && declared.shape[d] != t.shape()[d]) return std::nullopt;
  }
  return outputs;
}

}  // namespace

int constant_fold(GraphIR& g, size_t max_bytes) {
  const OpDef& const_op = op_registry().get("Const");
  // First every value is computed, producers first, without touching the graph; then the folded
  // nodes are replaced in one rewrite. Replacing them one at a time costs a walk over the whole
  // graph each (removing a node drops control edges to it everywhere), quadratic in all.
  Known values(static_cast<size_t>(g.id_bound()));
  std::vector<int32_t> folded;
  for (int32_t id : g.topological_order()) {
    const Node& n = g.node(id);
    if (n.type() == "Const") {
      values[static_cast<size_t>(id)] = {n.attrs.get<Tensor>("value")};
      continue;
    }
    if (!foldable(values, n)) continue;
    // Skip before computing when the declared shapes already say the result is too big.
    bool too_big = false;
    for (const TensorMeta& m : n.outputs) too_big |= bytes_of(m) > max_bytes;
    if (too_big) continue;
    std::optional<std::vector<Tensor>> result = evaluate(values, n);
    if (!result) continue;
    for (const Tensor& t : *result) too_big |= t.nbytes() > max_bytes;
    if (too_big) continue;
    values[static_cast<size_t>(id)] = std::move(*result);
    folded.push_back(id);
  }
  if (folded.empty()) return 0;

  // Saved before removing the nodes, so that each node's first constant can take its name (names
  // are what users fetch and what errors show). Control edges from the folded nodes are dropped
  // with them: waiting for a pure function of constants orders nothing.
  struct Saved {
    std::string name;
    SourceLoc loc;
    std::string requested, assigned;
  };
  std::vector<Saved> saved;
  saved.reserve(folded.size());
  for (int32_t id : folded) {
    const Node& n = g.node(id);
    saved.push_back({n.name, n.loc, n.requested_device, n.assigned_device});
  }
  g.remove_nodes(folded);
  std::vector<std::pair<Endpoint, Endpoint>> replacements;
  auto add_const = [&](size_t k, size_t output) {
    const Tensor& v = values[static_cast<size_t>(folded[k])][output];
    Node& c = g.add_node(const_op, {}, {{"value", v}}, {{v.dtype(), v.shape()}}, saved[k].name, saved[k].loc);
    c.requested_device = saved[k].requested;
    c.assigned_device = saved[k].assigned;
    replacements.push_back({{folded[k], static_cast<int32_t>(output)}, {c.id, 0}});
  };
  // Every first output before any second one: the names freed above go to their own nodes.
  for (size_t k = 0; k < folded.size(); ++k) add_const(k, 0);
  for (size_t k = 0; k < folded.size(); ++k)
    for (size_t i = 1; i < values[static_cast<size_t>(folded[k])].size(); ++i) add_const(k, i);
  g.replace_uses(replacements);
  return static_cast<int>(folded.size());
}

}  // namespace weft
