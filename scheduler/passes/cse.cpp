#include "scheduler/passes/cse.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "runtime/device.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

// Tensor attributes above this are not compared: hashing megabytes per node would cost more than
// the duplicate saves, and big equal constants are rare outside of deliberate copies.
constexpr size_t kMaxComparedBytes = size_t{1} << 20;

void mix(size_t& seed, size_t h) { seed ^= h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }

// Whether a tensor attribute's bytes can be read here and are small enough to compare.
bool comparable(const Tensor& t) {
  return t.defined() && !t.is_symbolic() && t.device_ptr() && t.device_ptr()->type() == DeviceType::CPU &&
         t.nbytes() <= kMaxComparedBytes;
}

bool tensors_equal(const Tensor& a, const Tensor& b) {
  if (a.same_as(b)) return true;
  if (!comparable(a) || !comparable(b)) return false;
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  // Bytes, not values: 0.0 and -0.0 differ and NaNs of one pattern match, which is what makes
  // the merged constant indistinguishable from both originals.
  return a.nbytes() == 0 || std::memcmp(raw_data(a), raw_data(b), a.nbytes()) == 0;
}

bool values_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>) {
          return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return tensors_equal(x, y);
        } else {
          // A subgraph (GraphAttr) compares by identity here: proving two bodies equal would cost
          // more than merging their callers saves.
          return x == y;
        }
      },
      a);
}

// Attributes are a list, but their order carries no meaning.
bool attrs_equal(const Attrs& a, const Attrs& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, value] : a) {
    const AttrValue* other = b.find(name);
    if (!other || !values_equal(value, *other)) return false;
  }
  return true;
}

size_t hash_value(const AttrValue& v) {
  size_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          mix(h, std::hash<uint64_t>{}(std::bit_cast<uint64_t>(x)));
        } else if constexpr (std::is_same_v<T, Shape> || std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t d : x) mix(h, std::hash<int64_t>{}(d));
        } else if constexpr (std::is_same_v<T, DType>) {
          mix(h, static_cast<size_t>(x));
        } else if constexpr (std::is_same_v<T, Tensor>) {
          // Equal tensors have equal dtype, shape and bytes; incomparable ones hash by shape only
          // and are told apart by tensors_equal.
          if (!x.defined() || x.is_symbolic()) return;
          mix(h, static_cast<size_t>(x.dtype()));
          for (int64_t d : x.shape()) mix(h, std::hash<int64_t>{}(d));
          if (comparable(x) && x.nbytes() > 0)
            mix(h, std::hash<std::string_view>{}(
                       std::string_view(static_cast<const char*>(raw_data(x)), x.nbytes())));
        } else if constexpr (std::is_same_v<T, GraphAttr>) {
          mix(h, std::hash<const void*>{}(x.get()));
        } else {
          mix(h, std::hash<T>{}(x));
        }
      },
      v);
  return h;
}

// A node's identity for CSE: op, inputs (sorted when the op is commutative), control inputs
// (sorted: they only order) and attributes.
struct Signature {
  const Node* node;
  std::vector<Endpoint> inputs;
  std::vector<int32_t> control;
  size_t hash = 0;
};

Signature signature_of(const Node& n) {
  Signature s{&n, n.inputs, n.control_inputs, 0};
  if (n.op->has(kCommutative)) std::ranges::sort(s.inputs);
  std::ranges::sort(s.control);
  s.control.erase(std::unique(s.control.begin(), s.control.end()), s.control.end());
  s.hash = std::hash<const void*>{}(n.op);
  for (const Endpoint& e : s.inputs) {
    mix(s.hash, std::hash<int32_t>{}(e.node));
    mix(s.hash, std::hash<int32_t>{}(e.index));
  }
  for (int32_t c : s.control) mix(s.hash, std::hash<int32_t>{}(c) * 31);
  size_t attrs = 0;
  for (const auto& [name, value] : n.attrs) {
    size_t item = std::hash<std::string>{}(name);
    mix(item, hash_value(value));
    attrs += item;  // a sum: independent of the attributes' order, as attrs_equal is
  }
  mix(s.hash, attrs);
  return s;
}

bool same_computation(const Signature& a, const Signature& b) {
  const Node& x = *a.node;
  const Node& y = *b.node;
  // Devices are compared too: the same op asked for on two devices is a deliberate copy (each
  // replica computing locally), not a duplicate.
  return a.hash == b.hash && x.op == y.op && a.inputs == b.inputs && a.control == b.control &&
         x.requested_device == y.requested_device && x.assigned_device == y.assigned_device &&
         x.outputs.size() == y.outputs.size() && attrs_equal(x.attrs, y.attrs);
}

bool mergeable(const Node& n) {
  if (n.op->has(kStateful) || n.op->has(kSideEffect)) return false;
  for (const auto& [name, value] : n.attrs)
    if (const auto* t = std::get_if<Tensor>(&value); t && !comparable(*t)) return false;
  return true;
}

}  // namespace

int eliminate_common_subexpressions(GraphIR& g) {
  // Producers come first, so by the time a node is looked at its inputs already point at the
  // survivors of their own duplicates, and chains of duplicates collapse in one walk. Each node
  // is rewired as it is reached, and the duplicates are removed together at the end: rewiring
  // and removing one duplicate at a time walks the whole graph per duplicate.
  std::unordered_map<size_t, std::vector<Signature>> seen;
  std::vector<int32_t> survivor_of(static_cast<size_t>(g.id_bound()), -1);
  std::vector<char> initializer(static_cast<size_t>(g.id_bound()), 0);
  for (int32_t id : g.initializers) initializer[static_cast<size_t>(id)] = 1;
  std::vector<int32_t> duplicates;
  for (int32_t id : g.topological_order()) {
    Node& n = g.node(id);
    for (Endpoint& e : n.inputs)
      if (const int32_t s = survivor_of[static_cast<size_t>(e.node)]; s >= 0) e.node = s;
    // What waited for a duplicate waits for its survivor, which computes the same thing no
    // later (it depends on the same inputs).
    bool control_changed = false;
    for (int32_t& c : n.control_inputs)
      if (const int32_t s = survivor_of[static_cast<size_t>(c)]; s >= 0) {
        c = s;
        control_changed = true;
      }
    if (control_changed) {
      std::vector<int32_t> unique;
      for (int32_t c : n.control_inputs)
        if (c != id && std::ranges::find(unique, c) == unique.end()) unique.push_back(c);
      n.control_inputs = std::move(unique);
    }
    if (!mergeable(n)) continue;
    Signature sig = signature_of(n);
    std::vector<Signature>& bucket = seen[sig.hash];
    auto match = std::ranges::find_if(bucket, [&](const Signature& s) { return same_computation(s, sig); });
    if (match == bucket.end()) {
      bucket.push_back(std::move(sig));
      continue;
    }
    const int32_t survivor = match->node->id;
    survivor_of[static_cast<size_t>(id)] = survivor;
    if (initializer[static_cast<size_t>(id)] && !initializer[static_cast<size_t>(survivor)]) {
      initializer[static_cast<size_t>(survivor)] = 1;
      g.initializers.push_back(survivor);
    }
    duplicates.push_back(id);
  }
  for (Endpoint& e : g.results)
    if (const int32_t s = survivor_of[static_cast<size_t>(e.node)]; s >= 0) e.node = s;
  g.remove_nodes(duplicates);
  return static_cast<int>(duplicates.size());
}

}  // namespace weft
