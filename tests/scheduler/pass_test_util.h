// Helpers for the graph-pass tests: run a graph as a function body, so a test can show that a
// pass leaves the results unchanged.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "scheduler/executor.h"

namespace weft::testing {

// Runs a copy of `g` with its args fed by `args` and returns its results. A copy, so the test can
// go on rewriting `g` (variables are shared with it, as in any clone).
inline std::vector<Tensor> run_body(const GraphIR& g, std::span<const Tensor> args = {}) {
  return Executor::for_function(std::make_shared<const GraphIR>(g.clone()))->run(args);
}

// The results as float vectors, for EXPECT_EQ between runs before and after a pass.
inline std::vector<std::vector<float>> floats(const std::vector<Tensor>& values) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : values) out.push_back(t.to_vector<float>());
  return out;
}

// How many live nodes of op `type` the graph has.
inline int count_of(const GraphIR& g, const std::string& type) {
  int n = 0;
  for (int32_t id : g.node_ids()) n += g.node(id).type() == type;
  return n;
}

}  // namespace weft::testing
