#include "api/graph.h"

#include <filesystem>

#include "api/graph_builder.h"
#include "api/saved_model.h"
#include "kernels/register_all.h"
#include "runtime/graph_format.h"

namespace weft {

namespace {
Tensor symbolic_of(const std::shared_ptr<GraphIR>& g, Endpoint e) {
  const Node& n = g->node(e.node);
  auto ref = std::make_unique<SymbolicRef>();
  ref->graph = g;
  ref->node_id = e.node;
  ref->output = e.index;
  ref->node_name = n.name;
  const TensorMeta& m = n.outputs.at(static_cast<size_t>(e.index));
  return Tensor::symbolic(m.dtype, m.shape, std::move(ref));
}
}  // namespace

const std::string& Operation::name() const { return node().name; }
const std::string& Operation::type() const { return node().type(); }
const SourceLoc& Operation::source_location() const { return node().loc; }
const Attrs& Operation::attrs() const { return node().attrs; }
int Graph::num_nodes() const { return ir().num_nodes(); }
std::string Graph::to_dot() const { return ir().to_dot(); }

const Node& Operation::node() const {
  if (!graph_)
    throw FailedPrecondition("[Operation] this operation ran eagerly and has no graph node (it was made outside a "
                             "GraphScope)");
  return graph_->node(id_);
}

std::string Operation::device() const {
  const Node& n = node();
  return n.assigned_device.empty() ? n.requested_device : n.assigned_device;
}

std::vector<Tensor> Operation::inputs() const {
  std::vector<Tensor> out;
  for (const Endpoint& e : node().inputs) out.push_back(symbolic_of(graph_, e));
  return out;
}

std::vector<Tensor> Operation::outputs() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < node().outputs.size(); ++i) out.push_back(symbolic_of(graph_, {id_, static_cast<int32_t>(i)}));
  return out;
}

std::vector<Operation> Operation::control_inputs() const {
  std::vector<Operation> out;
  for (int32_t c : node().control_inputs) out.emplace_back(graph_, c);
  return out;
}

Graph::Graph() : Graph(std::make_shared<GraphIR>()) {}

Graph::Graph(std::shared_ptr<GraphIR> ir)
    : ir_(std::move(ir)), builder_(std::make_shared<GraphBuilder>(ir_, GraphBuilder::Mode::kGraph)) {}

GraphBuilder& Graph::builder() const { return *builder_; }

Tensor Graph::tensor(std::string_view name) const { return symbolic_of(ir_, ir_->parse_endpoint(name)); }

Operation Graph::operation(std::string_view name) const {
  const Node* n = ir_->find(name);
  if (!n) ir_->not_found("operation", name);
  return Operation(ir_, n->id);
}

void Graph::save(const std::string& path) const { save_graph(path, *ir_); }

Graph Graph::load(const std::string& path) {
  register_builtin_ops();
  if (std::filesystem::is_directory(path)) return Graph(load_saved_model(path));
  return Graph(std::make_shared<GraphIR>(load_graph(path)));
}

std::vector<Operation> Graph::operations() const {
  std::vector<Operation> out;
  for (int32_t id : ir_->node_ids()) out.emplace_back(ir_, id);
  return out;
}

GraphScope::GraphScope(Graph& g) : graph_(g), saved_(eager_context().recorder) {
  eager_context().recorder = &graph_.builder();
}

GraphScope::~GraphScope() { eager_context().recorder = saved_; }

NameScope::NameScope(std::string name) { eager_context().name_scopes.push_back(std::move(name)); }
NameScope::~NameScope() { eager_context().name_scopes.pop_back(); }

Tensor placeholder(DType dtype, const Shape& shape, const std::string& name, const std::source_location& loc) {
  GraphBuilder* b = current_builder();
  if (!b)
    throw FailedPrecondition("[placeholder] '" + name +
                             "' can only be created inside a GraphScope or a traced function; eagerly, use a tensor");
  for (int64_t d : shape)
    if (d < -1) throw InvalidArgument("[placeholder] '" + name + "': shape " + shape.to_string() + " has a dim below -1");
  return b->placeholder(dtype, shape, name, loc);
}

}  // namespace weft
