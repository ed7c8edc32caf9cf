#include "scheduler/step_message_edges.h"

#include <map>
#include <vector>

#include "scheduler/step_rendezvous.h"

namespace weft {

namespace {

// Each node's consumers, through data and control edges.
std::vector<std::vector<int32_t>> consumers_of(const GraphIR& g) {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(g.id_bound()));
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    for (const Endpoint& e : n.inputs) out[static_cast<size_t>(e.node)].push_back(id);
    for (int32_t c : n.control_inputs) out[static_cast<size_t>(c)].push_back(id);
  }
  return out;
}

// Whether running the node may be something another task waits for: a Send, a collective (the
// other members wait for this one), or control flow, whose bodies may hold either.
bool other_tasks_may_wait_for(const Node& n) {
  const std::string& t = n.type();
  return t == "Send" || t.starts_with("Collective") || t == "If" || t == "While";
}

// Whether a node other tasks may wait for is reachable from node `from` of `g`.
bool reaches_a_send(const GraphIR& g, const std::vector<std::vector<int32_t>>& consumers, int32_t from) {
  std::vector<int32_t> stack{from};
  std::vector<bool> seen(consumers.size(), false);
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    for (int32_t c : consumers[static_cast<size_t>(id)]) {
      if (seen[static_cast<size_t>(c)]) continue;
      seen[static_cast<size_t>(c)] = true;
      if (other_tasks_may_wait_for(g.node(c))) return true;
      stack.push_back(c);
    }
  }
  return false;
}

}  // namespace

StepMessageEdges step_message_edges(const PartitionResult& p, const std::function<bool(std::string_view)>& is_local) {
  StepMessageEdges out;
  // (partition, arg node id) -> global feed index
  std::map<std::pair<int, int32_t>, int> feed_of;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const PartitionSlot& s = p.args[i];
    const GraphIR& g = p.partitions[static_cast<size_t>(s.partition)].graph;
    feed_of[{s.partition, g.args[static_cast<size_t>(s.index)]}] = static_cast<int>(i);
  }
  for (size_t pi = 0; pi < p.partitions.size(); ++pi) {
    const Partition& part = p.partitions[pi];
    if (!is_local(part.device)) continue;
    const GraphIR& g = part.graph;
    const std::vector<std::vector<int32_t>> consumers = consumers_of(g);
    for (int32_t id : g.node_ids()) {
      const Node& n = g.node(id);
      if (n.type() == "Send") {
        const RendezvousKey key = rendezvous_key_of(n.attrs, 0);
        if (is_local(key.dst_device)) continue;
        auto it = feed_of.find({static_cast<int>(pi), n.inputs.at(0).node});
        if (it != feed_of.end()) out.feed_sends.push_back({it->second, key, transfer_name(key)});
      } else if (n.type() == "Recv") {
        const RendezvousKey key = rendezvous_key_of(n.attrs, 0);
        if (!is_local(key.src_device) && !reaches_a_send(g, consumers, id)) out.reply_edges.push_back(transfer_name(key));
      }
    }
  }
  return out;
}

}  // namespace weft
