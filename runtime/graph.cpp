#include "runtime/graph.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <queue>

#include "runtime/kernel_registry.h"

namespace weft {

std::string SourceLoc::to_string() const {
  std::string_view f = file;
  if (size_t slash = f.find_last_of('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return std::string(f) + ":" + std::to_string(line);
}

std::string Node::describe() const {
  std::string s = "node '" + name + "' (" + (op ? op->display : std::string("?")) + ")";
  if (loc.known()) s += " created at " + loc.to_string();
  return s;
}

DType kernel_dtype(const GraphIR& g, const Node& n) {
  return kernel_dtype_of(
      *n.op, static_cast<int>(n.inputs.size()),
      [&](int i) { return g.meta(n.inputs[static_cast<size_t>(i)]).dtype; },
      n.outputs.empty() ? DType::Float32 : n.outputs[0].dtype);
}

bool has_side_effect(const Node& n) {
  if (n.op->has(kSideEffect)) return true;
  for (const auto& [name, value] : n.attrs)
    if (const GraphAttr* g = std::get_if<GraphAttr>(&value); g && *g && has_side_effect(**g)) return true;
  return false;
}

bool has_side_effect(const GraphIR& g) {
  for (int32_t id : g.node_ids())
    if (has_side_effect(g.node(id))) return true;
  return false;
}

std::vector<char> needed_nodes(const GraphIR& g, std::span<const int32_t> roots,
                               const std::function<bool(const Endpoint&)>& fed,
                               const std::function<bool(const Node&, int32_t)>& follow) {
  std::vector<char> needed(static_cast<size_t>(g.id_bound()), 0);
  std::vector<int32_t> stack;
  auto need = [&](int32_t id) {
    if (!needed[static_cast<size_t>(id)]) {
      needed[static_cast<size_t>(id)] = 1;
      stack.push_back(id);
    }
  };
  for (int32_t id : roots) need(g.node(id).id);  // node() throws for an id not in the graph
  while (!stack.empty()) {
    const Node& n = g.node(stack.back());
    stack.pop_back();
    for (const Endpoint& e : n.inputs)
      if (!fed || !fed(e)) need(e.node);
    for (int32_t c : n.control_inputs)
      if (!follow || follow(n, c)) need(c);
  }
  return needed;
}

GraphIR::GraphIR(const GraphIR& o)
    : args(o.args), results(o.results), variables(o.variables), initializers(o.initializers),
      by_name_(o.by_name_), next_suffix_(o.next_suffix_), live_(o.live_) {
  nodes_.reserve(o.nodes_.size());
  for (const auto& n : o.nodes_) nodes_.push_back(n ? std::make_unique<Node>(*n) : nullptr);
}

GraphIR& GraphIR::operator=(const GraphIR& o) {
  if (this != &o) {
    GraphIR copy(o);
    *this = std::move(copy);
  }
  return *this;
}

std::string GraphIR::unique_name(std::string_view base) const {
  int32_t suffix = 0;
  return unique_name(base, suffix);
}

std::string GraphIR::unique_name(std::string_view base, int32_t& suffix) const {
  suffix = 0;
  if (!by_name_.contains(base)) return std::string(base);
  // Start after the last suffix given to this base: counting from 1 each time made adding n
  // unnamed nodes of one op (Add, Add_1, ...) quadratic in n.
  int32_t i = 1;
  if (auto it = next_suffix_.find(base); it != next_suffix_.end()) i = it->second;
  for (;; ++i) {
    std::string candidate = std::string(base) + "_" + std::to_string(i);
    if (!by_name_.contains(candidate)) {
      suffix = i;
      return candidate;
    }
  }
}

Node& GraphIR::add_node(const OpDef& op, std::vector<Endpoint> inputs, Attrs attrs, std::vector<TensorMeta> outputs,
                        std::string_view name, SourceLoc loc) {
  for (const Endpoint& e : inputs)
    if (!alive(e.node) || e.index < 0 || e.index >= static_cast<int32_t>(node(e.node).outputs.size()))
      throw Internal("[graph] " + op.display + " input points at a missing output");
  auto n = std::make_unique<Node>();
  n->id = id_bound();
  const std::string_view base = name.empty() ? std::string_view(op.name) : name;
  int32_t suffix = 0;
  n->name = unique_name(base, suffix);
  if (suffix > 0) {
    auto it = next_suffix_.find(base);
    if (it == next_suffix_.end()) next_suffix_.emplace(std::string(base), suffix + 1);
    else it->second = suffix + 1;
  }
  n->op = &op;
  n->inputs = std::move(inputs);
  n->attrs = std::move(attrs);
  n->outputs = std::move(outputs);
  n->loc = std::move(loc);
  by_name_.emplace(n->name, n->id);
  nodes_.push_back(std::move(n));
  ++live_;
  return *nodes_.back();
}

void GraphIR::add_control_input(int32_t id, int32_t before) {
  Node& n = node(id);
  if (before == id || !alive(before)) return;
  if (std::find(n.control_inputs.begin(), n.control_inputs.end(), before) == n.control_inputs.end())
    n.control_inputs.push_back(before);
}

void GraphIR::remove_node(int32_t id) {
  Node& n = node(id);
  by_name_.erase(n.name);
  nodes_[static_cast<size_t>(id)].reset();
  --live_;
  for (auto& other : nodes_)
    if (other) std::erase(other->control_inputs, id);
  std::erase(initializers, id);
}

void GraphIR::remove_nodes(std::span<const int32_t> ids) {
  if (ids.empty()) return;
  std::vector<char> gone(nodes_.size(), 0);
  for (int32_t id : ids) {
    Node& n = node(id);  // throws for a dead id, as remove_node does
    by_name_.erase(n.name);
    nodes_[static_cast<size_t>(id)].reset();
    --live_;
    gone[static_cast<size_t>(id)] = 1;
  }
  auto removed = [&](int32_t id) { return gone[static_cast<size_t>(id)] != 0; };
  for (auto& other : nodes_)
    if (other) std::erase_if(other->control_inputs, removed);
  std::erase_if(initializers, removed);
}

Node& GraphIR::node(int32_t id) {
  if (!alive(id)) throw Internal("[graph] no node with id " + std::to_string(id));
  return *nodes_[static_cast<size_t>(id)];
}

const Node& GraphIR::node(int32_t id) const {
  if (!alive(id)) throw Internal("[graph] no node with id " + std::to_string(id));
  return *nodes_[static_cast<size_t>(id)];
}

const Node* GraphIR::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : nodes_[static_cast<size_t>(it->second)].get();
}

std::vector<int32_t> GraphIR::node_ids() const {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(live_));
  for (const auto& n : nodes_)
    if (n) ids.push_back(n->id);
  return ids;
}

std::vector<int32_t> GraphIR::topological_order() const {
  // Kahn's algorithm over data and control edges; ties broken by creation order so that the
  // order (and so the order stateful ops without edges between them run in) is deterministic.
  std::vector<int32_t> pending(nodes_.size(), 0);
  std::vector<std::vector<int32_t>> out(nodes_.size());
  for (const auto& n : nodes_) {
    if (!n) continue;
    for (const Endpoint& e : n->inputs) {
      ++pending[static_cast<size_t>(n->id)];
      out[static_cast<size_t>(e.node)].push_back(n->id);
    }
    for (int32_t c : n->control_inputs) {
      ++pending[static_cast<size_t>(n->id)];
      out[static_cast<size_t>(c)].push_back(n->id);
    }
  }
  // A min-heap of ready ids: the earliest-created ready node always goes next. (A stack would
  // run the nodes one producer releases in reverse creation order.)
  std::vector<int32_t> order;
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  order.reserve(static_cast<size_t>(live_));
  for (const auto& n : nodes_)
    if (n && pending[static_cast<size_t>(n->id)] == 0) ready.push(n->id);
  while (!ready.empty()) {
    int32_t id = ready.top();
    ready.pop();
    order.push_back(id);
    for (int32_t c : out[static_cast<size_t>(id)])
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
  }
  if (static_cast<int>(order.size()) != live_) {
    for (const auto& n : nodes_)
      if (n && pending[static_cast<size_t>(n->id)] > 0)
        throw InvalidArgument("[graph] the graph has a cycle through " + n->describe());
  }
  return order;
}

std::vector<std::vector<GraphIR::Use>> GraphIR::consumers() const {
  std::vector<std::vector<Use>> uses(nodes_.size());
  for (const auto& n : nodes_) {
    if (!n) continue;
    for (size_t s = 0; s < n->inputs.size(); ++s)
      uses[static_cast<size_t>(n->inputs[s].node)].push_back({n->id, static_cast<int32_t>(s)});
  }
  return uses;
}

void GraphIR::replace_uses(Endpoint from, Endpoint to) {
  for (auto& n : nodes_) {
    if (!n) continue;
    for (Endpoint& e : n->inputs)
      if (e == from) e = to;
  }
  for (Endpoint& e : results)
    if (e == from) e = to;
}

void GraphIR::replace_uses(std::span<const std::pair<Endpoint, Endpoint>> replacements) {
  if (replacements.empty()) return;
  // Sorted pairs, and a flag per producer so that most inputs cost no search.
  std::vector<std::pair<Endpoint, Endpoint>> sorted(replacements.begin(), replacements.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<char> replaced(nodes_.size(), 0);
  for (const auto& [from, to] : sorted)
    if (from.node >= 0 && from.node < id_bound()) replaced[static_cast<size_t>(from.node)] = 1;
  auto rewire = [&](Endpoint& e) {
    if (e.node < 0 || e.node >= id_bound() || !replaced[static_cast<size_t>(e.node)]) return;
    auto it = std::lower_bound(sorted.begin(), sorted.end(), e, [](const auto& p, const Endpoint& x) { return p.first < x; });
    if (it != sorted.end() && it->first == e) e = it->second;
  };
  for (auto& n : nodes_)
    if (n)
      for (Endpoint& e : n->inputs) rewire(e);
  for (Endpoint& e : results) rewire(e);
}

std::string GraphIR::endpoint_name(Endpoint e) const { return node(e.node).name + ":" + std::to_string(e.index); }

namespace {
// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

void GraphIR::not_found(std::string_view what, std::string_view name) const {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& [n, id] : by_name_) scored.emplace_back(edit_distance(name, n), n);
  std::sort(scored.begin(), scored.end());
  std::string msg = "[graph] no " + std::string(what) + " named '" + std::string(name) + "'";
  if (!scored.empty()) {
    msg += "; did you mean ";
    for (size_t i = 0; i < std::min<size_t>(3, scored.size()); ++i) msg += (i ? ", '" : "'") + scored[i].second + "'";
    msg += "?";
  } else {
    msg += " (the graph is empty)";
  }
  throw NotFound(msg);
}

Endpoint GraphIR::parse_endpoint(std::string_view tensor_name) const {
  std::string_view node_name = tensor_name;
  int32_t index = 0;
  if (size_t colon = tensor_name.rfind(':'); colon != std::string_view::npos) {
    node_name = tensor_name.substr(0, colon);
    std::string_view digits = tensor_name.substr(colon + 1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || p != digits.data() + digits.size() || index < 0)
      throw InvalidArgument("[graph] '" + std::string(tensor_name) + "' is not a tensor name like 'node:0'");
  }
  const Node* n = find(node_name);
  if (!n) not_found("tensor", tensor_name);
  if (index >= static_cast<int32_t>(n->outputs.size()))
    throw NotFound("[graph] " + n->describe() + " has " + std::to_string(n->outputs.size()) + " outputs; '" +
                   std::string(tensor_name) + "' does not exist");
  return {n->id, index};
}

}  // namespace weft
