#include "scheduler/passes/partition.h"

#include <algorithm>
#include <set>

#include "runtime/device_name.h"
#include "runtime/rendezvous.h"

namespace weft {

int PartitionResult::find(std::string_view device) const {
  for (size_t i = 0; i < partitions.size(); ++i)
    if (partitions[i].device == device) return static_cast<int>(i);
  return -1;
}

namespace {

// "localhost_task0_CPU1": a device in inserted node names, which must not hold ':'.
std::string device_tag(const std::string& device) {
  const DeviceSpec s = DeviceSpec::parse(device);
  std::string tag;
  if (s.job) tag += *s.job + "_";
  if (s.task) tag += "task" + std::to_string(*s.task) + "_";
  if (s.type) tag += device_type_name(*s.type);
  if (s.index) tag += std::to_string(*s.index);
  std::replace(tag.begin(), tag.end(), ':', '_');
  return tag;
}

void collect_subgraph_states(const Node& n, std::set<const VariableState*>& out) {
  for (const auto& [name, value] : n.attrs) {
    const GraphAttr* sub = std::get_if<GraphAttr>(&value);
    if (!sub || !*sub) continue;
    const GraphIR& g = **sub;
    for (const auto& [key, state] : g.variables) out.insert(state.get());
    for (int32_t id : g.node_ids()) collect_subgraph_states(g.node(id), out);
  }
}

class Partitioner {
 public:
  Partitioner(const GraphIR& g, const PartitionOptions& options) : g_(g), options_(options) {}
  PartitionResult run();

 private:
  // The Recv on device `dst` of global tensor `e` (made with its Send on first use).
  int32_t recv_of(Endpoint e, int dst);
  // The Recv on `dst` that fires once global node `producer` has run.
  int32_t control_recv_of(int32_t producer, int dst);
  // `base` names the nodes: "_send<base>_to_<dst tag>" and "_recv<base>_from_<src tag>".
  int32_t transfer(int src, int dst, Endpoint local_value, const TensorMeta& meta, const std::string& tensor_name,
                   const std::string& base, const SourceLoc& loc);
  std::string fresh_name(const GraphIR& part, const std::string& base) const;
  GraphIR& graph_of(int p) { return result_.partitions[static_cast<size_t>(p)].graph; }
  const std::string& device_of(int p) const { return result_.partitions[static_cast<size_t>(p)].device; }

  const GraphIR& g_;
  const PartitionOptions& options_;
  PartitionResult result_;
  std::vector<std::string> tags_;
  // Whether a node of g is named like the inserted nodes ("_send...", "_recv...", "_control_...").
  // If not, no inserted name can take the name of an original node added to the partition later,
  // and fresh_name needs no lookup (add_node keeps the inserted names apart from each other).
  bool names_taken_ = false;
  std::vector<int> part_of_;       // global id -> partition
  std::vector<int32_t> local_;     // global id -> id in its partition
  // Per global node: (output, dst, Recv id in dst) of each tensor sent, and (dst, Recv id) of each
  // control edge carried. Short lists: a tensor goes to a few devices at most.
  struct Sent {
    int32_t output;
    int dst;
    int32_t recv;
  };
  std::vector<std::vector<Sent>> recvs_;
  std::vector<std::vector<Sent>> control_recvs_;
};

std::string Partitioner::fresh_name(const GraphIR& part, const std::string& base) const {
  std::string name = base;
  if (!names_taken_) return name;
  for (int i = 1; g_.find(name) || part.find(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

int32_t Partitioner::transfer(int src, int dst, Endpoint local_value, const TensorMeta& meta,
                              const std::string& tensor_name, const std::string& base, const SourceLoc& loc) {
  static const OpDef& send_op = op_registry().get("Send");
  static const OpDef& recv_op = op_registry().get("Recv");
  RendezvousKey key{device_of(src), options_.incarnation, device_of(dst), tensor_name};
  if (auto it = options_.incarnations.find(key.src_device); it != options_.incarnations.end())
    key.src_incarnation = it->second;
  key.validate();  // full device names, an edge name the key can carry
  Attrs attrs{{"send_device", key.src_device},
              {"send_device_incarnation", static_cast<int64_t>(key.src_incarnation)},
              {"recv_device", key.dst_device},
              {"tensor_name", key.edge_name}};
  GraphIR& from = graph_of(src);
  Node& send = from.add_node(send_op, {local_value}, attrs, {},
                             fresh_name(from, "_send" + base + "_to_" + tags_[static_cast<size_t>(dst)]), loc);
  send.assigned_device = key.src_device;
  attrs.set("dtype", meta.dtype);
  attrs.set("shape", meta.shape);
  GraphIR& to = graph_of(dst);
  Node& recv = to.add_node(recv_op, {}, std::move(attrs), {meta},
                           fresh_name(to, "_recv" + base + "_from_" + tags_[static_cast<size_t>(src)]), loc);
  recv.assigned_device = key.dst_device;
  ++result_.num_sends;
  return recv.id;
}

int32_t Partitioner::recv_of(Endpoint e, int dst) {
  std::vector<Sent>& sent = recvs_[static_cast<size_t>(e.node)];
  for (const Sent& s : sent)
    if (s.output == e.index && s.dst == dst) return s.recv;
  const Node& producer = g_.node(e.node);
  const int32_t recv = transfer(part_of_[static_cast<size_t>(e.node)], dst, {local_[static_cast<size_t>(e.node)], e.index},
                                g_.meta(e), g_.endpoint_name(e), "_" + producer.name + "_" + std::to_string(e.index), producer.loc);
  sent.push_back({e.index, dst, recv});
  return recv;
}

int32_t Partitioner::control_recv_of(int32_t producer, int dst) {
  static const OpDef& const_op = op_registry().get("Const");
  std::vector<Sent>& sent = control_recvs_[static_cast<size_t>(producer)];
  for (const Sent& s : sent)
    if (s.dst == dst) return s.recv;
  const Node& p = g_.node(producer);
  const int src = part_of_[static_cast<size_t>(producer)];
  GraphIR& from = graph_of(src);
  // The smallest tensor there is; its value means nothing, its arrival means "p has run".
  const bool value = false;
  Tensor token = Tensor::from_host(DType::Bool, Shape{}, &value);
  Node& c = from.add_node(const_op, {}, {{"value", token}}, {{DType::Bool, Shape{}}},
                          fresh_name(from, "_control_" + p.name + "_to_" + tags_[static_cast<size_t>(dst)]), p.loc);
  c.assigned_device = device_of(src);
  from.add_control_input(c.id, local_[static_cast<size_t>(producer)]);
  const int32_t recv = transfer(src, dst, {c.id, 0}, {DType::Bool, Shape{}}, "^" + p.name, "c_" + p.name, p.loc);
  sent.push_back({-1, dst, recv});
  return recv;
}

PartitionResult Partitioner::run() {
  const std::vector<int32_t> order = g_.topological_order();
  std::map<std::string, int, std::less<>> devices;
  for (int32_t id : order) {
    const Node& n = g_.node(id);
    if (n.assigned_device.empty())
      throw InvalidArgument("[partition] " + n.describe() + " has no assigned device; run place first");
    devices.emplace(n.assigned_device, 0);
    names_taken_ |= n.name.starts_with("_send") || n.name.starts_with("_recv") || n.name.starts_with("_control_");
  }
  for (auto& [name, index] : devices) {
    index = static_cast<int>(result_.partitions.size());
    result_.partitions.push_back({name, GraphIR()});
    tags_.push_back(device_tag(name));
  }
  const size_t bound = static_cast<size_t>(g_.id_bound());
  part_of_.assign(bound, -1);
  local_.assign(bound, -1);
  recvs_.resize(bound);
  control_recvs_.resize(bound);
  for (int32_t id : order) part_of_[static_cast<size_t>(id)] = devices.find(g_.node(id).assigned_device)->second;

  std::vector<Endpoint> inputs;
  std::vector<int32_t> controls;
  for (int32_t id : order) {
    const Node& n = g_.node(id);
    const int p = part_of_[static_cast<size_t>(id)];
    inputs.clear();
    for (const Endpoint& e : n.inputs) {
      if (part_of_[static_cast<size_t>(e.node)] == p) inputs.push_back({local_[static_cast<size_t>(e.node)], e.index});
      else inputs.push_back({recv_of(e, p), 0});
    }
    controls.clear();
    for (int32_t c : n.control_inputs)
      controls.push_back(part_of_[static_cast<size_t>(c)] == p ? local_[static_cast<size_t>(c)] : control_recv_of(c, p));
    GraphIR& part = graph_of(p);
    Node& m = part.add_node(*n.op, inputs, n.attrs, n.outputs, n.name, n.loc);
    m.requested_device = n.requested_device;
    m.assigned_device = n.assigned_device;
    for (int32_t c : controls) part.add_control_input(m.id, c);
    local_[static_cast<size_t>(id)] = m.id;
  }

  for (int32_t arg : g_.args) {
    const int p = part_of_[static_cast<size_t>(arg)];
    GraphIR& part = graph_of(p);
    result_.args.push_back({p, static_cast<int>(part.args.size())});
    part.args.push_back(local_[static_cast<size_t>(arg)]);
  }
  for (const Endpoint& e : g_.results) {
    const int p = part_of_[static_cast<size_t>(e.node)];
    GraphIR& part = graph_of(p);
    result_.results.push_back({p, static_cast<int>(part.results.size())});
    part.results.push_back({local_[static_cast<size_t>(e.node)], e.index});
  }
  for (int32_t id : g_.initializers)
    if (g_.alive(id)) graph_of(part_of_[static_cast<size_t>(id)]).initializers.push_back(local_[static_cast<size_t>(id)]);

  // Variables: by the key a node names, and those the subgraphs of its If/While touch.
  std::map<const VariableState*, std::vector<const std::string*>> keys_of;
  for (const auto& [key, state] : g_.variables) keys_of[state.get()].push_back(&key);
  std::set<const VariableState*> nested;
  for (int32_t id : order) {
    const Node& n = g_.node(id);
    GraphIR& part = graph_of(part_of_[static_cast<size_t>(id)]);
    if (const AttrValue* v = n.attrs.find("var"))
      if (const std::string* key = std::get_if<std::string>(v))
        if (auto it = g_.variables.find(*key); it != g_.variables.end()) part.variables.insert(*it);
    nested.clear();
    collect_subgraph_states(n, nested);
    for (const VariableState* s : nested)
      if (auto it = keys_of.find(s); it != keys_of.end())
        for (const std::string* key : it->second) part.variables.emplace(*key, g_.variables.find(*key)->second);
  }

  result_.nodes.assign(bound, {});
  for (int32_t id : order) result_.nodes[static_cast<size_t>(id)] = {part_of_[static_cast<size_t>(id)], local_[static_cast<size_t>(id)]};
  return std::move(result_);
}

}  // namespace

PartitionResult partition(const GraphIR& g, const PartitionOptions& options) { return Partitioner(g, options).run(); }

}  // namespace weft
