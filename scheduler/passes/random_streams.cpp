#include "scheduler/passes/random_streams.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/random_seed.h"

namespace weft {

namespace {

bool is_unseeded_random(const Node& n) {
  if (!n.op->has(kRandom)) return false;
  const auto* seed = std::get_if<int64_t>(n.attrs.find("seed"));
  return seed && *seed < 0;
}

// Whether the graph or a body it holds has an unseeded random node (most do not: nothing is
// copied for them).
bool has_unseeded_random(const GraphIR& g) {
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    if (is_unseeded_random(n)) return true;
    for (const auto& [key, value] : n.attrs)
      if (const GraphAttr* body = std::get_if<GraphAttr>(&value); body && *body && has_unseeded_random(**body))
        return true;
  }
  return false;
}

// A body held by several attributes is copied once, so they keep sharing it.
using Copies = std::map<const GraphIR*, GraphAttr>;

int give(GraphIR& g, Copies& copies) {
  int given = 0;
  for (int32_t id : g.node_ids()) {
    Node& n = g.node(id);
    if (is_unseeded_random(n)) {
      n.attrs.set("stream_seed", resolve_seed(-1));
      ++given;
    }
    std::vector<std::pair<std::string, GraphAttr>> bodies;
    for (const auto& [key, value] : n.attrs) {
      const GraphAttr* body = std::get_if<GraphAttr>(&value);
      if (!body || !*body || !has_unseeded_random(**body)) continue;
      GraphAttr& copy = copies[body->get()];
      if (!copy) {
        auto fresh = std::make_shared<GraphIR>(**body);
        given += give(*fresh, copies);
        copy = std::move(fresh);
      }
      bodies.emplace_back(key, copy);
    }
    for (auto& [key, body] : bodies) n.attrs.set(key, std::move(body));
  }
  return given;
}

}  // namespace

int give_random_streams(GraphIR& g) {
  Copies copies;
  return give(g, copies);
}

}  // namespace weft
