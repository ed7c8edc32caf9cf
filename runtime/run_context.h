// What a kernel may ask of the executor that runs it: the graph's variables and a way to run a
// function-body subgraph (the branches of If, the condition and body of While). Null in eager
// mode, where the api layer does these things directly.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/variable_state.h"

namespace weft {

class GraphIR;

class RunContext {
 public:
  virtual ~RunContext() = default;
  // The variable the running graph knows by `name`; NotFound otherwise.
  virtual VariableState& variable(std::string_view name) = 0;
  // Runs `body` (a graph with args and results) on `args` and returns its results.
  virtual std::vector<Tensor> call(const GraphIR& body, std::span<const Tensor> args) = 0;
};

}  // namespace weft
