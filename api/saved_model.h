// The saved-model directory: what Function::save writes and Graph::load reads.
//
//   model_dir/graph.capnp             the traced graph (runtime/graph_format.h): arguments are
//                                     placeholders input_0, input_1, ...; results are Identity
//                                     nodes output_0, output_1, ...; the NoOp side_effects
//                                     runs the function's variable updates and prints, and
//                                     every output waits for it (a function that returns
//                                     nothing runs as the target "side_effects")
//   model_dir/variables.safetensors   the value of every variable the graph reads or writes,
//                                     by the variable's name
//
//   Graph g = Graph::load("model_dir");
//   Session sess(g);
//   auto out = sess.run({{"input_0:0", x}}, {"output_0:0"});   // the function's outputs, bit for bit
#pragma once

#include <memory>
#include <string>

namespace weft {

class GraphIR;  // runtime/graph.h

inline constexpr const char* kSavedGraphFile = "graph.capnp";
inline constexpr const char* kSavedVariablesFile = "variables.safetensors";
inline constexpr const char* kSideEffectsNode = "side_effects";

// Writes `fn_graph` (a traced function body: args and results set) as a saved model in `dir`,
// creating it if needed. The graph is copied; output_i Identity nodes are added to the copy.
void save_function_graph(const std::string& dir, const GraphIR& fn_graph);

// Reads a saved-model directory: the graph, and its variables set from the values file.
std::shared_ptr<GraphIR> load_saved_model(const std::string& dir);

}  // namespace weft
