// Random DAGs of mixed ops for the placement and partition tests: two float32 [8, 8] args, a
// constant, then unary, binary and matmul nodes reading random earlier nodes, optionally with
// control edges; every value stays finite, so two runs compare bit for bit.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "api/ops/creation.h"
#include "graph_test_util.h"

namespace weft::testing {

inline GraphIR random_dag(std::mt19937& rng, int num_nodes, bool control_edges) {
  GraphIR g;
  std::vector<int32_t> values;
  g.args = {placeholder(g, float32, {8, 8}, "a"), placeholder(g, float32, {8, 8}, "b")};
  values = g.args;
  std::vector<float> c(64);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  values.push_back(constant(g, Tensor::from_host(float32, {8, 8}, c.data())));
  auto pick = [&] { return values[rng() % values.size()]; };
  static const char* kUnary[] = {"Neg", "Relu", "Tanh", "Sigmoid", "Abs"};
  static const char* kBinary[] = {"Add", "Sub", "Maximum", "Minimum", "Mul"};
  while (static_cast<int>(values.size()) < num_nodes) {
    const unsigned kind = rng() % 10;
    int32_t id;
    if (kind < 4) {
      id = add(g, kUnary[rng() % 5], {{pick(), 0}});
    } else if (kind < 8) {
      // Tanh after Add/Mul keeps magnitudes bounded however deep the graph is.
      id = add(g, "Tanh", {{add(g, kBinary[rng() % 5], {{pick(), 0}, {pick(), 0}}), 0}});
    } else {
      id = add(g, "Tanh", {{add(g, "MatMul", {{pick(), 0}, {pick(), 0}}), 0}});
    }
    // Not on an arg: the executor plans a control input's producer, and a placeholder is fed.
    if (control_edges && rng() % 8 == 0) g.add_control_input(id, values[2 + rng() % (values.size() - 2)]);
    values.push_back(id);
  }
  for (int i = 0; i < 4; ++i) g.results.push_back({pick(), 0});
  g.results.push_back({values.back(), 0});
  return g;
}

}  // namespace weft::testing
