#include "api/saved_model.h"

#include <filesystem>
#include <map>
#include <system_error>

#include "kernels/register_all.h"
#include "runtime/graph_format.h"
#include "runtime/safetensors.h"

namespace weft {

namespace fs = std::filesystem;

void save_function_graph(const std::string& dir, const GraphIR& fn_graph) {
  GraphIR g = fn_graph.clone();
  // Calling the function runs its side effects (variable updates, prints) whatever it returns;
  // a Session runs only what its fetches need. So every side effect hangs off one NoOp,
  // "side_effects", and every output waits for it: fetching any output runs the whole function,
  // and a function that returns nothing runs as the target "side_effects".
  std::vector<int32_t> effects;
  for (int32_t id : g.node_ids())
    if (has_side_effect(g.node(id))) effects.push_back(id);
  int32_t all_effects = -1;
  if (!effects.empty()) {
    if (g.find(kSideEffectsNode))
      throw InvalidArgument(std::string("[save] the function already has a node named '") + kSideEffectsNode + "'");
    all_effects = g.add_node(op_registry().get("NoOp"), {}, {}, {}, kSideEffectsNode).id;
    for (int32_t id : effects) g.add_control_input(all_effects, id);
  }
  // The results become named nodes, so a Session (and weft-run) can fetch "output_i:0".
  const OpDef& identity = op_registry().get("Identity");
  std::vector<Endpoint> named;
  for (size_t i = 0; i < g.results.size(); ++i) {
    const Endpoint r = g.results[i];
    const std::string name = "output_" + std::to_string(i);
    if (g.find(name)) throw InvalidArgument("[save] the function already has a node named '" + name + "'");
    const Node& out = g.add_node(identity, {r}, {}, {g.meta(r)}, name, g.node(r.node).loc);
    if (all_effects >= 0) g.add_control_input(out.id, all_effects);
    named.push_back({out.id, 0});
  }
  g.results = std::move(named);

  std::map<std::string, Tensor> values;
  for (const auto& [name, state] : g.variables) {
    if (!state->value.defined())
      throw FailedPrecondition("[save] variable '" + name + "' has no value yet; initialise it before saving");
    values.emplace(name, state->value);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Unavailable("[save] cannot create directory " + dir + ": " + ec.message());
  // Values first: a directory whose graph file exists always has the values that go with it.
  save_tensors((fs::path(dir) / kSavedVariablesFile).string(), values, {{"format", "weft-saved-model"}});
  save_graph((fs::path(dir) / kSavedGraphFile).string(), g);
}

std::shared_ptr<GraphIR> load_saved_model(const std::string& dir) {
  register_builtin_ops();
  const fs::path graph_path = fs::path(dir) / kSavedGraphFile;
  if (!fs::exists(graph_path))
    throw NotFound("[load] " + dir + " is not a saved model: it has no " + kSavedGraphFile);
  auto g = std::make_shared<GraphIR>(load_graph(graph_path.string()));
  const fs::path values_path = fs::path(dir) / kSavedVariablesFile;
  if (g->variables.empty() && !fs::exists(values_path)) return g;
  TensorFile values = load_tensors(values_path.string());
  for (const auto& [name, state] : g->variables) {
    auto it = values.tensors.find(name);
    if (it == values.tensors.end())
      throw DataLoss("[load] " + values_path.string() + " has no value for variable '" + name + "'");
    const Tensor& v = it->second;
    if (v.dtype() != state->dtype || v.shape() != state->shape)
      throw InvalidArgument("[load] variable '" + name + "' is " + std::string(dtype_name(state->dtype)) +
                            state->shape.to_string() + " in the graph but " + std::string(dtype_name(v.dtype())) +
                            v.shape().to_string() + " in " + values_path.string());
    state->value = v;
  }
  return g;
}

}  // namespace weft
