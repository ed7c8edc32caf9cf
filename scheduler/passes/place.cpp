#include "scheduler/passes/place.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <queue>
#include <tuple>

#include "kernels/collective_attrs.h"
#include "runtime/kernel_registry.h"

namespace weft {

namespace {

// At most 64 candidates: a device set is a bit mask. (A cluster with more devices places per
// task first; that is the cluster session's business.)
using DeviceMask = uint64_t;
constexpr int kMaxDevices = 64;

// Device types that can run the node. A Placeholder is fed, not run: the caller's tensors are in
// host memory, so it sits on a CPU, and a consumer on a GPU gets the value through a Recv, which
// queues the copy on the GPU's copy stream. A view op's kernel is optional: it runs anywhere.
uint32_t kernel_types(const GraphIR& g, const Node& n) {
  if (n.type() == "Placeholder") return 1u << static_cast<int>(DeviceType::CPU);
  if (n.op->has(kForwardsInput)) return (1u << kNumDeviceTypes) - 1;
  const DType dt = kernel_dtype(g, n);
  uint32_t mask = 0;
  for (int t = 0; t < kNumDeviceTypes; ++t)
    if (has_kernel(*n.op, static_cast<DeviceType>(t), dt)) mask |= 1u << t;
  // A collective without an NCCL id never goes to a GPU (why: kernels/collective_attrs.h); a request
  // for one relaxes by soft placement to a CPU of the same task.
  if (collective_needs_host(*n.op, n.attrs))
    mask &= ~(1u << static_cast<int>(DeviceType::CUDA));
  // An If or While runs its subgraphs where it runs: only where every node of them can run (their
  // placeholders are the call's arguments, wherever it runs).
  for (const auto& [name, value] : n.attrs) {
    const auto* sub = std::get_if<GraphAttr>(&value);
    if (!sub || !*sub) continue;
    for (int32_t id : (*sub)->node_ids()) {
      const Node& inner = (*sub)->node(id);
      if (inner.type() != "Placeholder") mask &= kernel_types(**sub, inner);
    }
  }
  return mask;
}

std::string type_list(uint32_t types) {
  std::string s;
  for (int t = 0; t < kNumDeviceTypes; ++t)
    if (types & (1u << t)) s += std::string(s.empty() ? "" : ", ") + device_type_name(static_cast<DeviceType>(t));
  return s.empty() ? "none" : s;
}

double bytes_of(const TensorMeta& m) {
  // An unknown dimension counts as 1: the batch size is not known before the first run.
  double elements = 1;
  for (int64_t d : m.shape) elements *= d < 0 ? 1.0 : static_cast<double>(d);
  return elements * static_cast<double>(dtype_size(m.dtype));
}

bool compatible(const DeviceSpec& a, const DeviceSpec& b) {
  return (!a.job || !b.job || a.job == b.job) && (!a.replica || !b.replica || a.replica == b.replica) &&
         (!a.task || !b.task || a.task == b.task) && (!a.type || !b.type || a.type == b.type) &&
         (!a.index || !b.index || a.index == b.index);
}

void merge_into(DeviceSpec& a, const DeviceSpec& b) {
  if (!a.job) a.job = b.job;
  if (!a.replica) a.replica = b.replica;
  if (!a.task) a.task = b.task;
  if (!a.type) a.type = b.type;
  if (!a.index) a.index = b.index;
}

bool empty(const DeviceSpec& s) { return !s.job && !s.replica && !s.task && !s.type && !s.index; }

struct UnionFind {
  std::vector<int32_t> parent;
  explicit UnionFind(int32_t n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int32_t find(int32_t x) {
    while (parent[static_cast<size_t>(x)] != x) {
      parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
      x = parent[static_cast<size_t>(x)];
    }
    return x;
  }
  void unite(int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    // The smaller id becomes the root, so a group's root is its first node.
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// What a variable is, across a graph and its subgraphs: its shared state where the graph lists
// it (subgraphs name one variable by their own keys), else its key.
struct VariableIds {
  std::map<const VariableState*, int32_t> by_state;
  std::map<std::string, int32_t, std::less<>> by_key;
  int32_t next = 0;

  int32_t of(const GraphIR& g, const std::string& key) {
    if (auto found = g.variables.find(key); found != g.variables.end() && found->second) {
      auto [it, inserted] = by_state.try_emplace(found->second.get(), next);
      if (inserted) ++next;
      return it->second;
    }
    auto [it, inserted] = by_key.try_emplace(key, next);
    if (inserted) ++next;
    return it->second;
  }
};

const std::string* variable_key(const Node& n) {
  const AttrValue* v = n.attrs.find("var");
  return v ? std::get_if<std::string>(v) : nullptr;
}

// Every variable a control-flow node's subgraphs touch, nested ones included.
void subgraph_variables(const Node& n, VariableIds& ids, std::vector<int32_t>& out) {
  for (const auto& [name, value] : n.attrs) {
    const GraphAttr* sub = std::get_if<GraphAttr>(&value);
    if (!sub || !*sub) continue;
    const GraphIR& g = **sub;
    for (int32_t id : g.node_ids()) {
      const Node& inner = g.node(id);
      if (const std::string* key = variable_key(inner)) out.push_back(ids.of(g, *key));
      subgraph_variables(inner, ids, out);
    }
  }
}

class Placer {
 public:
  Placer(GraphIR& g, std::span<const PlacementDevice> devices, const PlacementOptions& options)
      : g_(g), devices_(devices), options_(options), bound_(g.id_bound()), k_(static_cast<int>(devices.size())) {}

  PlacementResult run();

 private:
  void parse_devices();
  void build_groups();
  void check_kernels_and_requests();
  void choose_candidates();
  void estimate_costs();
  void build_edges();
  void rank_nodes();
  double list_schedule();
  double simulate(const std::vector<int32_t>& device_of) const;
  DeviceMask devices_matching(const DeviceSpec& spec, uint32_t types) const;
  double transfer(int a, int b, double bytes) const {
    return a == b ? 0.0 : links_[static_cast<size_t>(a * k_ + b)].seconds(bytes);
  }
  size_t at(int32_t id) const { return static_cast<size_t>(id); }

  GraphIR& g_;
  std::span<const PlacementDevice> devices_;
  const PlacementOptions& options_;
  int32_t bound_;
  int k_;
  std::vector<DeviceSpec> specs_;
  std::vector<Link> links_;  // k x k
  uint32_t present_types_ = 0;
  std::vector<int32_t> order_;  // topological

  std::vector<int32_t> group_;               // per node: its group's root
  std::vector<int32_t> group_size_;          // per group root: how many nodes it holds
  std::vector<uint32_t> types_;              // per node: device types with a kernel
  std::vector<DeviceSpec> request_;          // per group root: the merged request
  std::vector<int32_t> requester_;           // per group root: first node with a request, or -1
  std::vector<DeviceMask> allowed_;          // per group root: where the group may go
  std::vector<std::tuple<int32_t, std::string>> soft_;  // (requester, why) of soft-placed groups

  std::vector<double> cost_;       // n x k: seconds of each node on each device
  std::vector<double> avg_cost_;   // per node, over its allowed devices
  std::vector<size_t> out_offset_;  // CSR of output bytes: node id -> first output
  std::vector<double> out_bytes_;
  std::vector<size_t> succ_offset_;  // CSR of successors (data and control), node id -> range
  std::vector<int32_t> succ_;
  std::vector<double> rank_;

  std::vector<int32_t> schedule_;  // the order nodes were scheduled in
  std::vector<int32_t> device_of_;
};

void Placer::parse_devices() {
  if (k_ == 0) throw InvalidArgument("[place] no candidate devices");
  if (k_ > kMaxDevices)
    throw InvalidArgument("[place] " + std::to_string(k_) + " candidate devices; at most " +
                          std::to_string(kMaxDevices) + " are supported");
  for (const PlacementDevice& d : devices_) {
    DeviceSpec s = DeviceSpec::parse(d.name);
    if (!s.type || !s.index || *s.type != d.type)
      throw InvalidArgument("[place] candidate device '" + d.name + "' is not a full device name of type " +
                            device_type_name(d.type));
    for (const DeviceSpec& other : specs_)
      if (other.to_string() == s.to_string()) throw InvalidArgument("[place] candidate device '" + d.name + "' is listed twice");
    specs_.push_back(std::move(s));
    present_types_ |= 1u << static_cast<int>(d.type);
  }
  links_.resize(static_cast<size_t>(k_ * k_));
  for (int a = 0; a < k_; ++a)
    for (int b = 0; b < k_; ++b) {
      links_[static_cast<size_t>(a * k_ + b)] =
          options_.links.between(specs_[static_cast<size_t>(a)], specs_[static_cast<size_t>(b)]);
    }
}

void Placer::build_groups() {
  UnionFind uf(bound_);
  VariableIds vars;
  std::vector<int32_t> first_user;  // per variable id: the first node touching it
  auto touch = [&](int32_t var, int32_t node) {
    if (static_cast<size_t>(var) >= first_user.size()) first_user.resize(static_cast<size_t>(var) + 1, -1);
    int32_t& first = first_user[static_cast<size_t>(var)];
    if (first < 0) first = node;
    else uf.unite(first, node);
  };
  std::vector<int32_t> nested;
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    if (const std::string* key = variable_key(n)) touch(vars.of(g_, *key), id);
    // An optimizer op updates the variable's own buffer, which ReadVariableForUpdate hands it.
    for (const Endpoint& e : n.inputs)
      if (g_.node(e.node).type() == "ReadVariableForUpdate") uf.unite(e.node, id);
    nested.clear();
    subgraph_variables(n, vars, nested);
    for (int32_t v : nested) touch(v, id);
  }
  group_.resize(at(bound_), -1);
  group_size_.assign(at(bound_), 0);
  for (int32_t id : order_) ++group_size_[at(group_[at(id)] = uf.find(id))];
}

void Placer::check_kernels_and_requests() {
  types_.assign(at(bound_), 0);
  request_.assign(at(bound_), {});
  requester_.assign(at(bound_), -1);
  std::vector<uint32_t> group_types(at(bound_), (1u << kNumDeviceTypes) - 1);
  std::vector<DeviceSpec> parsed(at(bound_));
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    types_[at(id)] = kernel_types(g_, n);
    if ((types_[at(id)] & present_types_) == 0)
      throw InvalidArgument("[place] no kernel for op " + n.type() + " (" + std::string(dtype_name(kernel_dtype(g_, n))) +
                            ") on any device: tried " + type_list(present_types_) + " [" + n.describe() + "]");
    const int32_t root = group_[at(id)];
    group_types[at(root)] &= types_[at(id)];
    if (n.requested_device.empty()) continue;
    try {
      parsed[at(id)] = DeviceSpec::parse(n.requested_device);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("[place] " + n.describe() + " requests an invalid device: " + e.what());
    }
    if (empty(parsed[at(id)])) continue;
    DeviceSpec& merged = request_[at(root)];
    if (!compatible(merged, parsed[at(id)])) {
      // Name the earlier node whose own request disagrees, not the merge of several.
      for (int32_t other : order_) {
        if (other == id || group_[at(other)] != root || g_.node(other).requested_device.empty()) continue;
        if (compatible(parsed[at(other)], parsed[at(id)])) continue;
        const Node& o = g_.node(other);
        if (!options_.allow_soft_placement)
          throw InvalidArgument("[place] colocated nodes request different devices: " + o.describe() + " requests '" +
                                o.requested_device + "' and " + n.describe() + " requests '" + n.requested_device +
                                "'; they must share a device (a variable with the ops that read or update it)");
        // Soft placement: the group keeps its first request (the variable's first reader, as
        // TensorFlow keeps a resource's ops with the resource) and says so.
        soft_.emplace_back(id, "but must share a device with " + o.describe() + ", which requests '" +
                                   o.requested_device + "' (they use the same variable)");
        break;
      }
      continue;
    }
    merge_into(merged, parsed[at(id)]);
    if (requester_[at(root)] < 0) requester_[at(root)] = id;
  }
  // A group's members must agree on a device type with kernels for all of them.
  for (int32_t id : order_) {
    const int32_t root = group_[at(id)];
    if (root != id) continue;
    if ((group_types[at(root)] & present_types_) != 0) continue;
    std::string members;
    for (int32_t m : order_)
      if (group_[at(m)] == root)
        members += "\n  " + g_.node(m).describe() + " has kernels on " + type_list(types_[at(m)] & present_types_);
    throw InvalidArgument("[place] colocated nodes have no device type in common:" + members);
  }
  for (int32_t id : order_) types_[at(id)] = group_types[at(group_[at(id)])];
}

DeviceMask Placer::devices_matching(const DeviceSpec& spec, uint32_t types) const {
  DeviceMask m = 0;
  for (int d = 0; d < k_; ++d)
    if ((types & (1u << static_cast<int>(devices_[static_cast<size_t>(d)].type))) && spec.matches(specs_[static_cast<size_t>(d)]))
      m |= DeviceMask{1} << d;
  return m;
}

void Placer::choose_candidates() {
  allowed_.assign(at(bound_), 0);
  const uint32_t all_types = (1u << kNumDeviceTypes) - 1;
  for (int32_t id : order_) {
    if (group_[at(id)] != id) continue;
    const DeviceSpec& req = request_[at(id)];
    const uint32_t types = types_[at(id)];
    DeviceMask m = devices_matching(req, types);
    if (m == 0 && group_size_[at(id)] == 1 && g_.node(id).type() == "Placeholder") {
      // Fed values arrive in host memory (kernel_types), so a placeholder asked onto a GPU (every
      // argument of a function traced under a GPU's DeviceScope) sits, quietly, on a CPU of the
      // same task; its consumers on the GPU get the value through a Recv. Not a soft placement.
      DeviceSpec host = req;
      host.type = DeviceType::CPU;
      host.index.reset();
      m = devices_matching(host, types);
    }
    if (m == 0) {
      const Node& asker = g_.node(requester_[at(id)]);
      std::string why;
      if (devices_matching(req, all_types) == 0) {
        why = "which names no device here";
      } else {
        why = "whose devices have no kernel for " + asker.type() + " (" + std::string(dtype_name(kernel_dtype(g_, asker))) + ")";
        if (group_[at(asker.id)] == id && kernel_types(g_, asker) != types) why += " or for an op colocated with it";
      }
      if (!options_.allow_soft_placement)
        throw InvalidArgument("[place] " + asker.describe() + " requests '" + asker.requested_device + "', " + why +
                              " (soft placement is off)");
      // Relax the request one part at a time: the device index, then its type; then any CPU.
      DeviceSpec rest = req;
      rest.index.reset();
      m = devices_matching(rest, types);
      if (m == 0) {
        rest.type.reset();
        m = devices_matching(rest, types);
      }
      if (m == 0) m = devices_matching(DeviceSpec{.type = DeviceType::CPU}, types);
      if (m == 0) m = devices_matching({}, types);
      soft_.emplace_back(asker.id, why);
    }
    allowed_[at(id)] = m;
  }
}

void Placer::estimate_costs() {
  cost_.assign(at(bound_) * static_cast<size_t>(k_), 0.0);
  avg_cost_.assign(at(bound_), 0.0);
  out_offset_.assign(at(bound_) + 1, 0);
  for (int32_t id = 0; id < bound_; ++id)
    out_offset_[at(id) + 1] = out_offset_[at(id)] + (g_.alive(id) ? g_.node(id).outputs.size() : 0);
  out_bytes_.resize(out_offset_.back());
  std::vector<Tensor> stand_ins;
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    for (size_t i = 0; i < n.outputs.size(); ++i) out_bytes_[out_offset_[at(id)] + i] = bytes_of(n.outputs[i]);
    // Fed, captured or empty: nothing to compute.
    const std::string& type = n.type();
    if (type == "Placeholder" || type == "Const" || type == "NoOp") continue;
    stand_ins.clear();
    for (const Endpoint& e : n.inputs) {
      const TensorMeta& m = g_.meta(e);
      stand_ins.push_back(Tensor::symbolic(m.dtype, m.shape, nullptr));
    }
    InferContext ic(*n.op, stand_ins, n.attrs);
    ic.set_num_outputs(static_cast<int>(n.outputs.size()));
    for (size_t i = 0; i < n.outputs.size(); ++i) ic.set_output(static_cast<int>(i), n.outputs[i].dtype, n.outputs[i].shape);
    Cost c;
    try {
      c = n.op->estimate_cost(ic);
    } catch (const Error&) {
      // A cost function that cannot read partial shapes costs the node only its launch.
    }
    const DeviceMask allowed = allowed_[at(group_[at(id)])];
    double sum = 0;
    int count = 0;
    for (int d = 0; d < k_; ++d) {
      const PlacementDevice& dev = devices_[static_cast<size_t>(d)];
      const double s = dev.op_overhead_seconds + c.flops / dev.flops_per_second + c.bytes / dev.bytes_per_second;
      cost_[at(id) * static_cast<size_t>(k_) + static_cast<size_t>(d)] = s;
      if (allowed & (DeviceMask{1} << d)) {
        sum += s;
        ++count;
      }
    }
    avg_cost_[at(id)] = count ? sum / count : 0.0;
  }
}

void Placer::build_edges() {
  succ_offset_.assign(at(bound_) + 1, 0);
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    for (const Endpoint& e : n.inputs) ++succ_offset_[at(e.node) + 1];
    for (int32_t c : n.control_inputs) ++succ_offset_[at(c) + 1];
  }
  for (size_t i = 1; i < succ_offset_.size(); ++i) succ_offset_[i] += succ_offset_[i - 1];
  succ_.resize(succ_offset_.back());
  std::vector<size_t> fill(succ_offset_.begin(), succ_offset_.end() - 1);
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    for (const Endpoint& e : n.inputs) succ_[fill[at(e.node)]++] = id;
    for (int32_t c : n.control_inputs) succ_[fill[at(c)]++] = id;
  }
}

void Placer::rank_nodes() {
  // The transfer an edge costs on average over pairs of distinct devices.
  double latency = 0, inverse_bandwidth = 0;
  if (k_ > 1) {
    for (int a = 0; a < k_; ++a)
      for (int b = 0; b < k_; ++b)
        if (a != b) {
          latency += links_[static_cast<size_t>(a * k_ + b)].latency_seconds;
          inverse_bandwidth += 1.0 / links_[static_cast<size_t>(a * k_ + b)].bytes_per_second;
        }
    const double pairs = static_cast<double>(k_) * (k_ - 1);
    latency /= pairs;
    inverse_bandwidth /= pairs;
  }
  // Upward rank: a node's average cost plus the costliest path from it to an exit. Walking the
  // topological order backwards finishes every consumer before its producers.
  rank_.assign(at(bound_), 0.0);
  std::vector<double> below(at(bound_), 0.0);
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int32_t id = *it;
    const Node& n = g_.node(id);
    rank_[at(id)] = avg_cost_[at(id)] + below[at(id)];
    for (const Endpoint& e : n.inputs) {
      const double c = latency + out_bytes_[out_offset_[at(e.node)] + static_cast<size_t>(e.index)] * inverse_bandwidth;
      below[at(e.node)] = std::max(below[at(e.node)], c + rank_[at(id)]);
    }
    for (int32_t c : n.control_inputs) below[at(c)] = std::max(below[at(c)], latency + rank_[at(id)]);
  }
}

double Placer::list_schedule() {
  std::vector<int32_t> topo_pos(at(bound_), 0);
  for (size_t i = 0; i < order_.size(); ++i) topo_pos[at(order_[i])] = static_cast<int32_t>(i);
  std::vector<int32_t> pending(at(bound_), 0);
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    pending[at(id)] = static_cast<int32_t>(n.inputs.size() + n.control_inputs.size());
  }
  // Highest rank first; among equals, the earlier in topological order.
  using Item = std::pair<double, int32_t>;  // (rank, -topo position)
  std::priority_queue<Item> ready;
  for (int32_t id : order_)
    if (pending[at(id)] == 0) ready.push({rank_[at(id)], -topo_pos[at(id)]});

  device_of_.assign(at(bound_), -1);
  std::vector<int32_t> group_device(at(bound_), -1);
  std::vector<double> finish(at(bound_), 0.0);
  std::vector<double> available(static_cast<size_t>(k_), 0.0);
  schedule_.clear();
  schedule_.reserve(order_.size());
  double makespan = 0;
  while (!ready.empty()) {
    const int32_t id = order_[at(-ready.top().second)];
    ready.pop();
    const Node& n = g_.node(id);
    const int32_t root = group_[at(id)];
    DeviceMask allowed = allowed_[at(root)];
    if (group_device[at(root)] >= 0) allowed = DeviceMask{1} << group_device[at(root)];
    int best = -1;
    double best_finish = 0;
    for (int d = 0; d < k_; ++d) {
      if (!(allowed & (DeviceMask{1} << d))) continue;
      double start = available[static_cast<size_t>(d)];
      for (const Endpoint& e : n.inputs) {
        const double bytes = out_bytes_[out_offset_[at(e.node)] + static_cast<size_t>(e.index)];
        start = std::max(start, finish[at(e.node)] + transfer(device_of_[at(e.node)], d, bytes));
      }
      for (int32_t c : n.control_inputs) start = std::max(start, finish[at(c)] + transfer(device_of_[at(c)], d, 0));
      const double f = start + cost_[at(id) * static_cast<size_t>(k_) + static_cast<size_t>(d)];
      if (best < 0 || f < best_finish) {
        best = d;
        best_finish = f;
      }
    }
    device_of_[at(id)] = best;
    group_device[at(root)] = best;
    finish[at(id)] = best_finish;
    available[static_cast<size_t>(best)] = best_finish;
    makespan = std::max(makespan, best_finish);
    schedule_.push_back(id);
    for (size_t s = succ_offset_[at(id)]; s < succ_offset_[at(id) + 1]; ++s)
      if (--pending[at(succ_[s])] == 0) ready.push({rank_[at(succ_[s])], -topo_pos[at(succ_[s])]});
  }
  return makespan;
}

// The makespan of a fixed assignment, nodes taken in the list schedule's order: the same model,
// so the comparisons in run() are like for like.
double Placer::simulate(const std::vector<int32_t>& device_of) const {
  std::vector<double> finish(at(bound_), 0.0);
  std::vector<double> available(static_cast<size_t>(k_), 0.0);
  double makespan = 0;
  for (int32_t id : schedule_) {
    const Node& n = g_.node(id);
    const int d = device_of[at(id)];
    double start = available[static_cast<size_t>(d)];
    for (const Endpoint& e : n.inputs) {
      const double bytes = out_bytes_[out_offset_[at(e.node)] + static_cast<size_t>(e.index)];
      start = std::max(start, finish[at(e.node)] + transfer(device_of[at(e.node)], d, bytes));
    }
    for (int32_t c : n.control_inputs) start = std::max(start, finish[at(c)] + transfer(device_of[at(c)], d, 0));
    finish[at(id)] = start + cost_[at(id) * static_cast<size_t>(k_) + static_cast<size_t>(d)];
    available[static_cast<size_t>(d)] = finish[at(id)];
    makespan = std::max(makespan, finish[at(id)]);
  }
  return makespan;
}

PlacementResult Placer::run() {
  parse_devices();
  order_ = g_.topological_order();
  build_groups();
  check_kernels_and_requests();
  choose_candidates();
  estimate_costs();
  build_edges();
  rank_nodes();

  PlacementResult result;
  result.list_schedule_seconds = list_schedule();
  std::vector<int32_t> best = device_of_;
  result.modelled_seconds = result.list_schedule_seconds;

  // A source that costs nothing (a constant, a fed placeholder) is placed first, before its
  // consumers: where they all went is the better home for it.
  std::vector<int32_t> moved = device_of_;
  bool any_moved = false;
  for (int32_t id : order_) {
    const Node& n = g_.node(id);
    if (!n.inputs.empty() || !n.control_inputs.empty() || group_size_[at(id)] != 1 || avg_cost_[at(id)] != 0) continue;
    if (succ_offset_[at(id)] == succ_offset_[at(id) + 1]) continue;
    const int32_t target = device_of_[at(succ_[succ_offset_[at(id)]])];
    bool same = (allowed_[at(id)] & (DeviceMask{1} << target)) != 0;
    for (size_t s = succ_offset_[at(id)]; same && s < succ_offset_[at(id) + 1]; ++s) same = device_of_[at(succ_[s])] == target;
    if (same && target != moved[at(id)]) {
      moved[at(id)] = target;
      any_moved = true;
    }
  }
  if (any_moved) {
    const double t = simulate(moved);
    if (t <= result.modelled_seconds) {
      result.modelled_seconds = t;
      best = moved;
    }
  }

  // Every node free to go there on one device; the groups that cannot stay where they were.
  result.single_device_seconds = -1;
  for (int d = 0; d < k_; ++d) {
    std::vector<int32_t> single(at(bound_), -1);
    for (int32_t id : order_) {
      const int32_t root = group_[at(id)];
      single[at(id)] = (allowed_[at(root)] & (DeviceMask{1} << d)) ? d : device_of_[at(root)];
    }
    const double t = simulate(single);
    if (result.single_device_seconds < 0 || t < result.single_device_seconds) result.single_device_seconds = t;
    if (t < result.modelled_seconds) {
      result.modelled_seconds = t;
      result.used_single_device = true;
      best = std::move(single);
    }
  }

  for (int32_t id : order_) g_.node(id).assigned_device = devices_[static_cast<size_t>(best[at(id)])].name;
  for (const auto& [asker, why] : soft_) {
    const Node& n = g_.node(asker);
    result.notices.push_back("[place] " + n.describe() + " requests '" + n.requested_device + "', " + why +
                             "; placed on " + n.assigned_device);
  }
  return result;
}

}  // namespace

Link LinkModel::between(const DeviceSpec& a, const DeviceSpec& b) const {
  if (a.job != b.job || a.replica != b.replica || a.task != b.task) return cross_task;
  if (a.type == b.type && a.index == b.index) return {};
  return a.type == DeviceType::CPU && b.type == DeviceType::CPU ? same_task_host : same_task_device;
}

PlacementResult place(GraphIR& g, std::span<const PlacementDevice> devices, const PlacementOptions& options) {
  return Placer(g, devices, options).run();
}

std::string placement_summary(const GraphIR& g) {
  std::string s;
  for (int32_t id : g.topological_order()) {
    const Node& n = g.node(id);
    s += n.name + " (" + n.type() + ") -> " + (n.assigned_device.empty() ? std::string("(not placed)") : n.assigned_device) + "\n";
  }
  return s;
}

}  // namespace weft
