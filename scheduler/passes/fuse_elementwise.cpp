#include "scheduler/passes/fuse_elementwise.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>

#include "kernels/defs/fused.h"
#include "runtime/device_name.h"

namespace weft {

namespace {

// Members of a group beyond this stop growing it: keeps programs within the kernel's registers.
constexpr size_t kMaxGroup = 64;

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }

// Where a node may run fused: whether every device it names (requested or assigned) is of a type
// `fits`, or names no type. A device name that does not parse keeps the node as it is.
template <class Fits>
bool devices_fit(const Node& n, Fits fits) {
  for (const std::string* d : {&n.requested_device, &n.assigned_device}) {
    if (d->empty()) continue;
    try {
      DeviceSpec spec = DeviceSpec::parse(*d);
      if (spec.type && !fits(*spec.type)) return false;
    } catch (const Error&) {
      return false;
    }
  }
  return true;
}

// Elementwise groups fuse on CPUs and GPUs alike: the CUDA FusedElementwise runs each opcode
// through the functor of the op's own CUDA kernel, one instruction at a time, so a fused program
// gives the bits of the separate CUDA ops (tests/gpu/fused_test.cpp checks it, chains of Mul
// then Sub included), and a traced function the bits of its eager run.
bool fuses_elementwise(const Node& n) {
  return devices_fit(n, [](DeviceType t) { return t == DeviceType::CPU || t == DeviceType::CUDA; });
}

// Products fuse on CPUs only: on a GPU, a FusedMatMul could come out of another cuBLASLt
// algorithm than the eager MatMul (the bias epilogue changes the heuristic's choice), and traced
// and eager results must agree bit for bit. On a GPU the bias and activation after a MatMul fuse
// as an elementwise group instead.
bool fuses_products(const Node& n) {
  return devices_fit(n, [](DeviceType t) { return t == DeviceType::CPU; });
}

// What the pass needs to know about the graph as it was before any rewrite of this round.
struct Facts {
  std::vector<int32_t> pos;  // by id: position in a topological order
  std::vector<std::vector<GraphIR::Use>> uses;
  std::vector<std::vector<int32_t>> control_dependents;
  std::vector<char> is_result, is_initializer;
  std::vector<char> elementwise_ok, product_ok;  // by id: fuses_elementwise, fuses_products

  explicit Facts(const GraphIR& g) {
    const size_t ids = static_cast<size_t>(g.id_bound());
    pos.assign(ids, -1);
    const std::vector<int32_t> order = g.topological_order();
    for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int32_t>(i);
    uses = g.consumers();
    control_dependents.assign(ids, {});
    is_result.assign(ids, 0);
    is_initializer.assign(ids, 0);
    elementwise_ok.assign(ids, 0);
    product_ok.assign(ids, 0);
    for (int32_t id : order) {
      const Node& n = g.node(id);
      for (int32_t c : n.control_inputs) control_dependents[static_cast<size_t>(c)].push_back(id);
      elementwise_ok[static_cast<size_t>(id)] = fuses_elementwise(n);
      product_ok[static_cast<size_t>(id)] = fuses_products(n);
    }
    for (const Endpoint& e : g.results) is_result[static_cast<size_t>(e.node)] = 1;
    for (int32_t id : g.initializers) is_initializer[static_cast<size_t>(id)] = 1;
  }
};

// Whether `p` may vanish into a group whose last node is `root`: nothing outside the group reads
// it, nothing that must run after it (a control dependent) can be upstream of the group, and it
// runs where the root does (which fuses_elementwise or fuses_products, checked on the root, allows).
bool can_absorb(const GraphIR& g, const Facts& f, int32_t p, int32_t root, const std::set<int32_t>& group) {
  const size_t i = static_cast<size_t>(p);
  if (f.is_result[i] || f.is_initializer[i] || f.uses[i].empty()) return false;
  for (const GraphIR::Use& u : f.uses[i])
    if (!group.contains(u.node)) return false;
  // A control dependent after the root in topological order cannot feed the group.
  for (int32_t d : f.control_dependents[i])
    if (!group.contains(d) && f.pos[static_cast<size_t>(d)] < f.pos[static_cast<size_t>(root)]) return false;
  const Node& n = g.node(p);
  const Node& r = g.node(root);
  return n.requested_device == r.requested_device && n.assigned_device == r.assigned_device;
}

// The opcode of an elementwise node FusedElementwise can take over, or -1.
int fusable_opcode(const GraphIR& g, const Node& n) {
  const OpDef& op = *n.op;
  if (!op.has(kElementwise) || op.has(kStateful) || op.has(kSideEffect) || op.has(kForwardsInput)) return -1;
  const int code = fused::opcode_for(op.name);
  if (code < 0 || n.outputs.size() != 1 || !is_float(n.outputs[0].dtype)) return -1;
  if (static_cast<int>(n.inputs.size()) != fused::kOpcodes[code].arity) return -1;
  for (const Endpoint& e : n.inputs)
    if (g.meta(e).dtype != n.outputs[0].dtype) return -1;
  return code;
}

// One group to replace: `members` (the last one is the root) become one node of `op`.
struct Replacement {
  std::vector<int32_t> members;
  const OpDef* op;
  std::vector<Endpoint> inputs;
  Attrs attrs;
};

// Replaces every group, each with one node keeping its root's name, source line and devices, the
// members' control inputs from outside and the control edges into the members from outside. All
// at once: the groups are disjoint and only their roots are read from outside, so one walk over
// the graph rewires everything (one walk per group made the pass quadratic in the graph's size).
void replace_groups(GraphIR& g, std::vector<Replacement>& groups) {
  if (groups.empty()) return;
  std::vector<int32_t> group_of(static_cast<size_t>(g.id_bound()), -1);
  for (size_t k = 0; k < groups.size(); ++k)
    for (int32_t m : groups[k].members) group_of[static_cast<size_t>(m)] = static_cast<int32_t>(k);
  struct Saved {
    std::string name;
    SourceLoc loc;
    std::vector<TensorMeta> outputs;
    std::string requested, assigned;
    std::vector<int32_t> control_inputs;  // from outside the group; members of other groups included
  };
  std::vector<Saved> saved(groups.size());
  std::vector<int32_t> all_members;
  for (size_t k = 0; k < groups.size(); ++k) {
    const Node& root = g.node(groups[k].members.back());
    saved[k] = {root.name, root.loc, root.outputs, root.requested_device, root.assigned_device, {}};
    for (int32_t m : groups[k].members) {
      all_members.push_back(m);
      for (int32_t c : g.node(m).control_inputs)
        if (group_of[static_cast<size_t>(c)] != static_cast<int32_t>(k) &&
            std::find(saved[k].control_inputs.begin(), saved[k].control_inputs.end(), c) == saved[k].control_inputs.end())
          saved[k].control_inputs.push_back(c);
    }
  }
  // Nodes outside every group that wait for a member: (node, group).
  std::vector<std::pair<int32_t, int32_t>> dependents;
  for (int32_t id : g.node_ids()) {
    if (group_of[static_cast<size_t>(id)] >= 0) continue;
    for (int32_t c : g.node(id).control_inputs)
      if (const int32_t k = group_of[static_cast<size_t>(c)]; k >= 0) dependents.emplace_back(id, k);
  }
  g.remove_nodes(all_members);  // frees the roots' names for the fused nodes
  std::vector<int32_t> fused(groups.size());
  std::vector<std::pair<Endpoint, Endpoint>> rewire;
  for (size_t k = 0; k < groups.size(); ++k) {
    Node& n = g.add_node(*groups[k].op, {}, std::move(groups[k].attrs), saved[k].outputs, saved[k].name, saved[k].loc);
    // Inputs are set after adding: some are roots of other groups, rewired below.
    n.inputs = std::move(groups[k].inputs);
    n.requested_device = saved[k].requested;
    n.assigned_device = saved[k].assigned;
    fused[k] = n.id;
    rewire.push_back({{groups[k].members.back(), 0}, {n.id, 0}});
  }
  for (size_t k = 0; k < groups.size(); ++k)
    for (int32_t c : saved[k].control_inputs) {
      const int32_t other = group_of[static_cast<size_t>(c)];
      g.add_control_input(fused[k], other >= 0 ? fused[static_cast<size_t>(other)] : c);
    }
  for (const auto& [node, k] : dependents) g.add_control_input(node, fused[static_cast<size_t>(k)]);
  g.replace_uses(rewire);
}

// ---- MatMul + bias (+ activation), MatMul then ReluGrad -> FusedMatMul ----
// ---- Conv2D + bias (+ relu) -> FusedConv2D ----

// A product and the nodes its epilogue takes over, as one FusedMatMul of (A, B, operand): the
// bias Add and the activation after it, if any; or, in a backward pass, the ReluGrad that reads
// the product as its gradient, whose x becomes the operand.
struct DensePattern {
  std::vector<int32_t> members;  // the MatMul first, the node whose output the fused node takes last
  Endpoint operand;              // the bias, or the relu's x
  std::string activation;        // FusedMatMul's attribute: "", "relu", "sigmoid", "tanh", "relu_grad"
};

// The ReluGrad `rg` reading product `mm` (output `out`) as its gradient, when its epilogue can
// take it over: x of the product's dtype and shape. (ReluGrad never broadcasts: its shapes must
// be equal, statically and, where dims are unknown, when it runs, as FusedMatMul checks its x.)
bool relu_grad_fits(const GraphIR& g, const Node& rg, int32_t mm, const TensorMeta& out) {
  if (rg.type() != "ReluGrad" || rg.inputs.size() != 2 || rg.inputs[0] != Endpoint{mm, 0} || rg.inputs[1].node == mm)
    return false;
  const TensorMeta& x = g.meta(rg.inputs[1]);
  return x.dtype == out.dtype && x.shape == out.shape && rg.outputs[0].shape == out.shape &&
         rg.outputs[0].dtype == out.dtype;
}

// The single reader of `id`'s only output, when exactly one slot of one node reads it and it
// is not a result.
int32_t sole_reader(const Facts& f, int32_t id) {
  const auto& u = f.uses[static_cast<size_t>(id)];
  return u.size() == 1 && !f.is_result[static_cast<size_t>(id)] ? u[0].node : -1;
}

// What product `id` (output `out`) and its sole reader `next` fuse into, if anything; the
// members are not yet checked for absorption.
// FusedConv2D takes the bias and a Relu only (the activation convolutional networks use); a
// sigmoid or tanh after a convolution's bias stays a node of its own.
std::optional<DensePattern> dense_pattern_at(const GraphIR& g, const Facts& f, int32_t id, int32_t next,
                                             const TensorMeta& out) {
  const Node& n = g.node(next);
  const bool conv = g.node(id).type() == "Conv2D";
  if (!conv && relu_grad_fits(g, n, id, out)) return DensePattern{{id, next}, n.inputs[1], "relu_grad"};
  if (n.type() != "Add") return std::nullopt;
  const int64_t r = out.shape.rank();
  const Endpoint bias = n.inputs[0].node == id ? n.inputs[1] : n.inputs[0];
  if (bias.node == id || g.meta(bias).dtype != out.dtype || g.meta(bias).shape != Shape{out.shape[r - 1]})
    return std::nullopt;
  DensePattern p{{id, next}, bias, ""};
  if (const int32_t act = sole_reader(f, next); act >= 0) {
    const Node& t = g.node(act);
    const std::set<int32_t> with_act{id, next, act};
    const bool fits = t.type() == "Relu" || (!conv && (t.type() == "Sigmoid" || t.type() == "Tanh"));
    if (fits && t.outputs[0].dtype == out.dtype &&
        can_absorb(g, f, next, act, with_act) && can_absorb(g, f, id, act, with_act)) {
      p.members.push_back(act);
      for (char c : t.type()) p.activation += static_cast<char>(std::tolower(c));
    }
  }
  return p;
}

std::vector<DensePattern> find_dense_patterns(const GraphIR& g, const Facts& f) {
  std::vector<DensePattern> found;
  for (int32_t id : g.node_ids()) {
    const Node& mm = g.node(id);
    const bool conv = mm.type() == "Conv2D";
    if ((mm.type() != "MatMul" && !conv) || mm.outputs.size() != 1) continue;
    const TensorMeta& out = mm.outputs[0];
    const int64_t r = out.shape.rank();
    if (!is_float(out.dtype) || r < 2 || out.shape[r - 1] < 0 || (conv && r != 4)) continue;
    // FusedMatMul takes a matrix B and folds A's leading dims into rows (not under transpose_a).
    if (!conv && (g.meta(mm.inputs[1]).shape.rank() != 2 || g.meta(mm.inputs[0]).shape.rank() != r ||
                  (r > 2 && mm.attrs.get_or<bool>("transpose_a", false))))
      continue;
    const int32_t next = sole_reader(f, id);
    if (next < 0) continue;
    std::optional<DensePattern> p = dense_pattern_at(g, f, id, next, out);
    if (!p) continue;
    const int32_t root = p->members.back();
    const std::set<int32_t> group(p->members.begin(), p->members.end());
    if (!can_absorb(g, f, id, root, group) || !f.product_ok[static_cast<size_t>(root)] ||
        f.is_initializer[static_cast<size_t>(root)])
      continue;
    found.push_back(std::move(*p));
  }
  return found;
}

int fuse_dense(GraphIR& g) {
  const Facts f(g);
  std::vector<DensePattern> patterns = find_dense_patterns(g, f);
  static const OpDef& fused_matmul = op_registry().get("FusedMatMul");
  static const OpDef& fused_conv2d = op_registry().get("FusedConv2D");
  int removed = 0;
  std::vector<Replacement> groups;
  for (DensePattern& p : patterns) {
    const Node& mm = g.node(p.members.front());
    const bool conv = mm.type() == "Conv2D";
    Attrs attrs;
    if (conv) {
      attrs = mm.attrs;  // the window: strides, padding, explicit_paddings, dilations
      attrs.set("activation", std::move(p.activation));
    } else {
      attrs = Attrs{{"transpose_a", mm.attrs.get_or<bool>("transpose_a", false)},
                    {"transpose_b", mm.attrs.get_or<bool>("transpose_b", false)},
                    {"activation", std::move(p.activation)}};
    }
    removed += static_cast<int>(p.members.size()) - 1;
    groups.push_back({std::move(p.members), conv ? &fused_conv2d : &fused_matmul,
                      {mm.inputs[0], mm.inputs[1], p.operand}, std::move(attrs)});
  }
  replace_groups(g, groups);
  return removed;
}

// ---- FusedBatchNorm then Relu, ReluGrad then FusedBatchNormGrad, MaxPoolGrad then ReluGrad ----
//
// A ResNet block's batch norm and relu, and their gradients, as one node each, and a LeNet's
// pooled relu's gradient as one MaxPoolGrad (the "activation" attribute,
// kernels/defs/normalization.cpp and pooling.cpp): a pass over the activations fewer each.
// On CPUs only: the CUDA kernels refuse the attribute, so this runs only for a graph no GPU may
// take (fuse_elementwise's cpu_only_fusions), and never for a node that names a GPU.

// The (reader, slot) pairs reading output `out`.
std::vector<GraphIR::Use> readers_of(const GraphIR& g, const Facts& f, Endpoint out) {
  std::vector<GraphIR::Use> readers;
  for (const GraphIR::Use& u : f.uses[static_cast<size_t>(out.node)])
    if (g.node(u.node).inputs[static_cast<size_t>(u.slot)] == out) readers.push_back(u);
  return readers;
}

// Whether `absorbed` (whose output 0 only `bn` is to read, directly or through the rewiring) may
// vanish into batch norm node `bn`.
bool can_fold_activation(const GraphIR& g, const Facts& f, int32_t absorbed, int32_t bn) {
  const Node& a = g.node(absorbed);
  const Node& b = g.node(bn);
  const size_t i = static_cast<size_t>(absorbed);
  return a.control_inputs.empty() && !f.is_initializer[i] && f.product_ok[i] && f.product_ok[static_cast<size_t>(bn)] &&
         a.requested_device == b.requested_device && a.assigned_device == b.assigned_device &&
         is_float(a.outputs[0].dtype) && b.attrs.get_or<std::string>("activation", "").empty();
}

int fuse_batch_norm_activations(GraphIR& g) {
  const Facts f(g);
  auto is_result = [&](Endpoint e) { return std::find(g.results.begin(), g.results.end(), e) != g.results.end(); };
  std::vector<std::pair<Endpoint, Endpoint>> rewire;
  std::vector<int32_t> gone;
  std::vector<std::pair<int32_t, int32_t>> dependents;  // (node that waited for a gone one, its batch norm)
  std::set<int32_t> taken;  // a ReluGrad between a MaxPoolGrad and a FusedBatchNormGrad goes to one
  auto absorb = [&](int32_t absorbed, int32_t bn) {
    taken.insert(absorbed);
    gone.push_back(absorbed);
    for (int32_t d : f.control_dependents[static_cast<size_t>(absorbed)]) dependents.emplace_back(d, bn);
  };
  for (int32_t id : g.node_ids()) {
    Node& n = g.node(id);
    if (n.type() == "FusedBatchNorm") {
      const std::vector<GraphIR::Use> readers = readers_of(g, f, {id, 0});
      if (readers.size() != 1 || is_result({id, 0})) continue;
      const int32_t relu = readers[0].node;
      if (g.node(relu).type() != "Relu" || !can_fold_activation(g, f, relu, id) ||
          g.node(relu).outputs[0].dtype != n.outputs[0].dtype)
        continue;
      n.attrs.set("activation", std::string("relu"));
      rewire.push_back({{relu, 0}, {id, 0}});
      absorb(relu, id);
    } else if (n.type() == "FusedBatchNormGrad" && n.inputs.size() == 5) {
      const int32_t rg = n.inputs[0].node;
      const Node& r = g.node(rg);
      if (r.type() != "ReluGrad" || r.inputs.size() != 2 || n.inputs[0].index != 0 || taken.contains(rg) ||
          readers_of(g, f, {rg, 0}).size() != 1 || is_result({rg, 0}) || !can_fold_activation(g, f, rg, id))
        continue;
      // ReluGrad never broadcasts: dy and the mask's y are x's shape (the kernel checks it again
      // where dims are unknown here).
      const TensorMeta& x = g.meta(n.inputs[1]);
      const TensorMeta& dy = g.meta(r.inputs[0]);
      const TensorMeta& y = g.meta(r.inputs[1]);
      if (dy.dtype != x.dtype || y.dtype != x.dtype || dy.shape != x.shape || y.shape != x.shape) continue;
      const Endpoint relu_dy = r.inputs[0], relu_y = r.inputs[1];
      n.inputs[0] = relu_dy;
      n.inputs.push_back(relu_y);
      n.attrs.set("activation", std::string("relu"));
      absorb(rg, id);
    } else if (n.type() == "MaxPoolGrad") {
      // ReluGrad(MaxPoolGrad(x, y, dy), x): the relu's output x pooled, its gradient masked.
      const std::vector<GraphIR::Use> readers = readers_of(g, f, {id, 0});
      if (readers.size() != 1 || is_result({id, 0}) || readers[0].slot != 0) continue;
      const int32_t rg = readers[0].node;
      const Node& r = g.node(rg);
      if (r.type() != "ReluGrad" || r.inputs.size() != 2 || r.inputs[1] != n.inputs[0] || taken.contains(rg) ||
          r.outputs[0].dtype != n.outputs[0].dtype || !can_fold_activation(g, f, rg, id))
        continue;
      n.attrs.set("activation", std::string("relu"));
      rewire.push_back({{rg, 0}, {id, 0}});
      absorb(rg, id);
    }
  }
  if (gone.empty()) return 0;
  g.replace_uses(rewire);
  g.remove_nodes(gone);
  for (const auto& [node, bn] : dependents)
    if (g.alive(node)) g.add_control_input(node, bn);
  return static_cast<int>(gone.size());
}

// ---- elementwise groups -> FusedElementwise ----

// Grows a group backwards from `root`: a producer joins once every reader of it is in the group.
// Candidates are taken latest-first in topological order, so by the time one is looked at, every
// member that could read it has already joined.
std::vector<int32_t> grow_group(const GraphIR& g, const Facts& f, int32_t root, const std::vector<char>& taken) {
  const Shape& shape = g.node(root).outputs[0].shape;
  std::set<int32_t> group{root};
  auto later = [&](int32_t a, int32_t b) { return f.pos[static_cast<size_t>(a)] < f.pos[static_cast<size_t>(b)]; };
  std::priority_queue<int32_t, std::vector<int32_t>, decltype(later)> candidates(later);
  for (const Endpoint& e : g.node(root).inputs) candidates.push(e.node);
  while (!candidates.empty() && group.size() < kMaxGroup) {
    const int32_t p = candidates.top();
    candidates.pop();
    if (group.contains(p) || taken[static_cast<size_t>(p)]) continue;
    const Node& n = g.node(p);
    // Same shape as the result: a smaller intermediate would be recomputed per output element.
    if (fusable_opcode(g, n) < 0 || n.outputs[0].shape != shape || n.outputs[0].dtype != g.node(root).outputs[0].dtype)
      continue;
    if (!can_absorb(g, f, p, root, group)) continue;
    group.insert(p);
    for (const Endpoint& e : n.inputs) candidates.push(e.node);
  }
  std::vector<int32_t> members(group.begin(), group.end());
  std::sort(members.begin(), members.end(), later);
  return members;
}

// The program of a group (members in topological order), with registers reused once dead.
void build_program(const GraphIR& g, const std::vector<int32_t>& members, std::vector<Endpoint>* inputs,
                   Attrs* attrs) {
  std::map<int32_t, size_t> index;  // member id -> instruction
  for (size_t i = 0; i < members.size(); ++i) index[members[i]] = i;
  std::map<Endpoint, int64_t> input_reg;
  std::vector<size_t> last_use(members.size(), 0);
  for (size_t i = 0; i < members.size(); ++i) {
    for (const Endpoint& e : g.node(members[i]).inputs) {
      if (auto it = index.find(e.node); it != index.end()) {
        last_use[it->second] = i;
      } else if (!input_reg.contains(e)) {
        input_reg.emplace(e, static_cast<int64_t>(inputs->size()));
        inputs->push_back(e);
      }
    }
  }
  const int64_t num_inputs = static_cast<int64_t>(inputs->size());
  int64_t num_registers = num_inputs;
  std::vector<int64_t> reg_of(members.size(), -1), free_regs, program;
  for (size_t i = 0; i < members.size(); ++i) {
    const Node& n = g.node(members[i]);
    int64_t src[2] = {-1, -1};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Endpoint& e = n.inputs[k];
      auto it = index.find(e.node);
      src[k] = it != index.end() ? reg_of[it->second] : input_reg.at(e);
    }
    int64_t dst;
    if (free_regs.empty()) {
      dst = num_registers++;
    } else {
      dst = free_regs.back();
      free_regs.pop_back();
    }
    reg_of[i] = dst;
    program.insert(program.end(), {fused::opcode_for(n.type()), dst, src[0], src[1]});
    // Sources dead after this instruction free their registers, after dst was chosen, so an
    // instruction never writes a register it reads.
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto it = index.find(n.inputs[k].node);
      if (it == index.end() || last_use[it->second] != i || (k == 1 && src[1] == src[0])) continue;
      free_regs.push_back(reg_of[it->second]);
    }
  }
  attrs->set("program", std::move(program));
  attrs->set("num_registers", num_registers);
  attrs->set("output", reg_of.back());
}

int fuse_elementwise_groups(GraphIR& g) {
  const Facts f(g);
  std::vector<char> taken(static_cast<size_t>(g.id_bound()), 0);
  std::vector<std::vector<int32_t>> groups;
  std::vector<int32_t> order = g.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int32_t id = *it;
    if (taken[static_cast<size_t>(id)] || fusable_opcode(g, g.node(id)) < 0 || !f.elementwise_ok[static_cast<size_t>(id)] ||
        f.is_initializer[static_cast<size_t>(id)])
      continue;
    std::vector<int32_t> members = grow_group(g, f, id, taken);
    if (members.size() < 2) continue;
    for (int32_t m : members) taken[static_cast<size_t>(m)] = 1;
    groups.push_back(std::move(members));
  }
  static const OpDef& fused_op = op_registry().get("FusedElementwise");
  int removed = 0;
  std::vector<Replacement> replacements;
  for (std::vector<int32_t>& members : groups) {
    std::vector<Endpoint> inputs;
    Attrs attrs;
    build_program(g, members, &inputs, &attrs);
    removed += static_cast<int>(members.size()) - 1;
    replacements.push_back({std::move(members), &fused_op, std::move(inputs), std::move(attrs)});
  }
  replace_groups(g, replacements);
  return removed;
}

}  // namespace

int fuse_elementwise(GraphIR& g, bool cpu_only_fusions) {
  // Dense layers first: their bias add and activation would otherwise fuse with each other and
  // leave the GEMM writing and the fused node reading back the whole output.
  int removed = cpu_only_fusions ? fuse_batch_norm_activations(g) : 0;
  removed += fuse_dense(g);
  removed += fuse_elementwise_groups(g);
  return removed;
}

}  // namespace weft
