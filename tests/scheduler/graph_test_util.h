// Helpers for building graphs node by node in scheduler tests, with shapes inferred by the ops'
// own infer functions, as tracing would.
#pragma once

#include <string>
#include <vector>

#include "api/dispatch.h"
#include "runtime/graph.h"

namespace weft::testing {

// Adds a node of op `type` reading `inputs`; output metas come from the op's infer function.
inline int32_t add(GraphIR& g, const std::string& type, std::vector<Endpoint> inputs, Attrs attrs = {},
                   const std::string& name = "") {
  const OpDef& op = op_def(type);
  std::vector<Tensor> stand_ins;
  for (const Endpoint& e : inputs) {
    const TensorMeta& m = g.meta(e);
    stand_ins.push_back(Tensor::symbolic(m.dtype, m.shape, std::make_unique<SymbolicRef>()));
  }
  InferContext ic(op, stand_ins, attrs);
  op.infer(ic);
  std::vector<TensorMeta> outs;
  for (int i = 0; i < ic.num_outputs(); ++i) outs.push_back(ic.output(i));
  return g.add_node(op, std::move(inputs), std::move(attrs), std::move(outs), name, {"graph_test.cpp", "test", 1}).id;
}

inline int32_t placeholder(GraphIR& g, DType dtype, Shape shape, const std::string& name) {
  return add(g, "Placeholder", {}, {{"dtype", dtype}, {"shape", std::move(shape)}}, name);
}

inline int32_t constant(GraphIR& g, const Tensor& value, const std::string& name = "") {
  return add(g, "Const", {}, {{"value", value}}, name);
}

}  // namespace weft::testing
