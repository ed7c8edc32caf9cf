#include "api/distribute/replicate.h"

#include <atomic>
#include <functional>
#include <map>

#include "api/context.h"
#include "api/devices.h"
#include "api/dispatch.h"
#include "api/graph_builder.h"
#include "api/ops/math.h"
#include "comm/collective_executor.h"
#include "comm/nccl/nccl_id.h"
#include "runtime/device_name.h"

namespace weft::distribute {

namespace {

std::string replica_prefix(size_t r) { return "replica_" + std::to_string(r) + "/"; }

bool is_collective(const Node& n) { return n.type().rfind("Collective", 0) == 0; }

using VariableFor = std::function<std::pair<std::string, std::shared_ptr<VariableState>>(
    const std::shared_ptr<VariableState>&, const std::string&)>;

// Points a graph's variable nodes (and those of its subgraphs: If and While bodies) at the
// replica's variables.
void use_replica_variables(GraphIR& g, const VariableFor& variable_for) {
  std::map<std::string, std::string, std::less<>> renamed;
  std::map<std::string, std::shared_ptr<VariableState>, std::less<>> variables;
  for (const auto& [key, state] : g.variables) {
    auto [new_key, new_state] = variable_for(state, key);
    renamed[key] = new_key;
    variables[new_key] = new_state;
  }
  g.variables = std::move(variables);
  for (int32_t id : g.node_ids()) {
    Node& n = g.node(id);
    if (const auto* var = std::get_if<std::string>(n.attrs.find("var")))
      if (auto it = renamed.find(*var); it != renamed.end()) n.attrs.set("var", it->second);
    std::vector<std::pair<std::string, GraphAttr>> subgraphs;
    for (const auto& [key, value] : n.attrs)
      if (const GraphAttr* sub = std::get_if<GraphAttr>(&value); sub && *sub) {
        auto copy = std::make_shared<GraphIR>(**sub);
        use_replica_variables(*copy, variable_for);
        subgraphs.emplace_back(key, std::move(copy));
      }
    for (auto& [key, sub] : subgraphs) n.attrs.set(key, GraphAttr(std::move(sub)));
  }
}

}  // namespace

std::pair<std::string, std::shared_ptr<VariableState>> ReplicaVariables::for_replica(
    const std::shared_ptr<VariableState>& original, const std::string& original_key, size_t replica,
    const std::string& device) {
  if (replica == 0) return {original_key, original};
  auto base = base_names_.find(original.get());
  if (base == base_names_.end()) {
    // One name per variable for the whole DataParallel, unique among its variables: two
    // variables that share a name ("dense/kernel" of two models) get "_1" and so on.
    std::string name = original->name.empty() ? "Variable" : original->name;
    const int n = names_used_[name]++;
    if (n > 0) name += "_" + std::to_string(n);
    base = base_names_.emplace(original.get(), name).first;
    originals_.push_back(original);
  }
  const std::string key = replica_prefix(replica) + base->second;
  std::shared_ptr<VariableState>& copy = copies_[{original.get(), replica}];
  if (!copy) {
    copy = std::make_shared<VariableState>();
    copy->dtype = original->dtype;
    copy->shape = original->shape;
    copy->name = key;
    copy->trainable = original->trainable;
    copy->device = device;  // placement keeps its nodes on the replica's device
  }
  return {key, copy};
}

ReplicatedGraph replicate(const GraphIR& trace, size_t weight_arg, const ReplicaLayout& layout,
                          ReplicaVariables& variables, const ReplicaInputs& inputs) {
  const size_t replicas = layout.devices.size();
  int64_t instances = 0;
  for (int32_t id : trace.node_ids()) instances += is_collective(trace.node(id)) ? 1 : 0;
  for (const Endpoint& e : trace.results) {
    const TensorMeta& m = trace.meta(e);
    if (m.shape.rank() != 0 || !is_floating(m.dtype))
      throw InvalidArgument("[DataParallel] a step returns floating-point scalars (a loss, a metric), which are "
                            "averaged over the replicas; result " +
                            trace.endpoint_name(e) + " is " + std::string(dtype_name(m.dtype)) + m.shape.to_string());
  }

  auto global = std::make_shared<GraphIR>();
  ReplicatedGraph out;
  const std::vector<int32_t> order = trace.topological_order();
  std::vector<std::vector<Endpoint>> results(trace.results.size());
  std::vector<Endpoint> weights;
  for (size_t r = 0; r < replicas; ++r) {
    GraphIR copy = trace.clone();
    use_replica_variables(copy, [&](const std::shared_ptr<VariableState>& state, const std::string& key) {
      return variables.for_replica(state, key, r, layout.devices[r]);
    });
    for (const auto& [key, state] : copy.variables) global->variables[key] = state;
    std::vector<int32_t> id_of(static_cast<size_t>(copy.id_bound()), -1);
    for (int32_t id : order) {
      const Node& n = copy.node(id);
      std::vector<Endpoint> inputs;
      for (const Endpoint& e : n.inputs) inputs.push_back({id_of[static_cast<size_t>(e.node)], e.index});
      Attrs attrs = n.attrs;
      if (is_collective(n)) {
        attrs.set("member", static_cast<int64_t>(r));
        attrs.set("group_instances", instances);
      }
      Node& m = global->add_node(*n.op, std::move(inputs), std::move(attrs), n.outputs, replica_prefix(r) + n.name, n.loc);
      m.requested_device = layout.devices[r];
      id_of[static_cast<size_t>(id)] = m.id;
      for (int32_t c : n.control_inputs) global->add_control_input(m.id, id_of[static_cast<size_t>(c)]);
      if (has_side_effect(m)) out.targets.push_back(m.id);
    }
    std::vector<Endpoint> args;
    for (int32_t arg : copy.args) args.push_back({id_of[static_cast<size_t>(arg)], 0});
    if (inputs) {
      // The replica reads its own rows: its argument placeholders give way to the reading nodes.
      GraphBuilder b(global, GraphBuilder::Mode::kFunction);
      RecorderScope recording(&b);
      DeviceScope on_replica(layout.devices[r]);
      const std::vector<Tensor> read = inputs(static_cast<int64_t>(r), static_cast<int64_t>(replicas));
      if (read.size() != args.size())
        throw Internal("[DataParallel] the replica's input gives " + std::to_string(read.size()) + " tensors for " +
                       std::to_string(args.size()) + " arguments");
      std::vector<std::pair<Endpoint, Endpoint>> replaced;
      std::vector<int32_t> placeholders;
      for (size_t i = 0; i < args.size(); ++i) {
        const Endpoint e = b.endpoint_of(read[i], std::source_location::current());
        const TensorMeta& want = global->meta(args[i]);
        if (global->meta(e).dtype != want.dtype)
          throw InvalidArgument("[DataParallel] the replica's input " + std::to_string(i) + " is " +
                                std::string(dtype_name(global->meta(e).dtype)) + "; the step was traced for " +
                                std::string(dtype_name(want.dtype)));
        replaced.push_back({args[i], e});
        placeholders.push_back(args[i].node);
        args[i] = e;
      }
      global->replace_uses(replaced);
      global->remove_nodes(placeholders);
    } else {
      for (const Endpoint& arg : args) {
        // Fed on the host and sent to the replica: the chief holds the global batch.
        if (!layout.host_device.empty()) global->node(arg.node).requested_device = layout.host_device;
        out.feeds.push_back(arg);
      }
    }
    weights.push_back(args.at(weight_arg));
    for (size_t i = 0; i < copy.results.size(); ++i)
      results[i].push_back({id_of[static_cast<size_t>(copy.results[i].node)], copy.results[i].index});
  }

  // The mean over the global batch: sum over the replicas of result_r * weight_r, on the host.
  {
    GraphBuilder b(global, GraphBuilder::Mode::kFunction);
    RecorderScope recording(&b);
    std::optional<DeviceScope> on_host;
    if (!layout.host_device.empty()) on_host.emplace(layout.host_device);
    for (const std::vector<Endpoint>& per_replica : results) {
      Tensor sum;
      for (size_t r = 0; r < per_replica.size(); ++r) {
        Tensor value = b.symbolic(per_replica[r]);
        Tensor w = b.symbolic(weights[r]);
        if (w.dtype() != value.dtype()) w = cast(w, value.dtype());
        Tensor term = mul(value, w);
        sum = sum.defined() ? add(sum, term) : term;
      }
      out.results.push_back(b.endpoint_of(sum, std::source_location::current()));
    }
  }
  out.graph = std::move(*global);
  return out;
}

bool replicas_use_nccl(const ReplicaLayout& layout) {
  if (!nccl_compiled_in() || layout.devices.size() < 2) return false;
  for (const std::string& d : layout.devices)
    if (DeviceSpec::parse(d).type != DeviceType::CUDA) return false;
  return true;
}

std::string nccl_id_for_new_group(const ReplicaLayout& layout) {
  return replicas_use_nccl(layout) ? new_nccl_id() : std::string();
}

int64_t new_collective_group_key() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1);
}

bool renew_nccl_ids(GraphIR& trace) {
  std::map<std::string, std::string> renewed;  // old id -> new id
  for (int32_t id = 0; id < trace.id_bound(); ++id) {
    if (!trace.alive(id)) continue;
    Node& n = trace.node(id);
    const AttrValue* v = n.attrs.find("nccl_id");
    const std::string* old = v ? std::get_if<std::string>(v) : nullptr;
    if (!old || old->empty()) continue;
    auto [it, fresh] = renewed.try_emplace(*old);
    if (fresh) it->second = new_nccl_id();
    n.attrs.set("nccl_id", it->second);
  }
  return !renewed.empty();
}

ReplicatedGraph broadcast_graph(const GraphIR& trace, const ReplicaLayout& layout, ReplicaVariables& variables,
                                int64_t group_key, const std::string& nccl_id) {
  ReplicatedGraph out;
  if (layout.devices.size() < 2) return out;
  static const OpDef& read = op_def("ReadVariable");
  static const OpDef& broadcast = op_def("CollectiveBroadcast");
  static const OpDef& assign = op_def("AssignVariable");
  GraphIR& g = out.graph;
  // Every variable of the trace and of its subgraphs.
  std::map<const VariableState*, std::pair<std::string, std::shared_ptr<VariableState>>> all;
  std::function<void(const GraphIR&)> collect = [&](const GraphIR& sub) {
    for (const auto& [key, state] : sub.variables) all.try_emplace(state.get(), key, state);
    for (int32_t id : sub.node_ids())
      for (const auto& [name, value] : sub.node(id).attrs)
        if (const GraphAttr* s = std::get_if<GraphAttr>(&value); s && *s) collect(**s);
  };
  collect(trace);
  std::string members;
  for (const std::string& d : layout.devices) members += (members.empty() ? "" : ",") + d;
  // One CollectiveBroadcast per variable, rooted at replica 0: MPI's own broadcast spreads the
  // values (a tree), so the chief does not send every replica its own copy.
  int64_t instance = 0;
  const auto instances = static_cast<int64_t>(all.size());
  for (const auto& [id, entry] : all) {
    const auto& [key, state] = entry;
    g.variables[key] = state;
    const TensorMeta meta{state->dtype, state->shape};
    Attrs common{{"group_key", group_key}, {"group_members", members}, {"root", int64_t{0}},
                 {"instance_key", instance++}, {"group_instances", instances}};
    if (!nccl_id.empty()) common.set("nccl_id", nccl_id);
    Node& source = g.add_node(read, {}, Attrs{{"var", key}, {"dtype", state->dtype}, {"shape", state->shape}}, {meta},
                              "broadcast/read/" + key);
    source.requested_device = layout.devices[0];
    Attrs root = common;
    root.set("member", int64_t{0});
    Node& send = g.add_node(broadcast, {{source.id, 0}}, std::move(root), {meta}, "broadcast/root/" + key);
    send.requested_device = layout.devices[0];
    out.targets.push_back(send.id);
    for (size_t r = 1; r < layout.devices.size(); ++r) {
      auto [copy_key, copy] = variables.for_replica(state, key, r, layout.devices[r]);
      g.variables[copy_key] = copy;
      Attrs member = common;
      member.set("member", static_cast<int64_t>(r));
      member.set("dtype", state->dtype);
      member.set("shape", state->shape);
      Node& receive = g.add_node(broadcast, {}, std::move(member), {meta}, "broadcast/" + copy_key);
      receive.requested_device = layout.devices[r];
      Node& write = g.add_node(assign, {{receive.id, 0}},
                               Attrs{{"var", copy_key}, {"dtype", state->dtype}, {"shape", state->shape}}, {},
                               "broadcast/assign/" + copy_key);
      write.requested_device = layout.devices[r];
      out.targets.push_back(write.id);
    }
  }
  return out;
}

}  // namespace weft::distribute
