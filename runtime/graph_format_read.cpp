// Reading graph files: Cap'n Proto (runtime/proto/graph.capnp) -> a validated GraphIR. The bytes
// are untrusted; see runtime/graph_format.h for what is checked.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "runtime/error.h"
#include "runtime/file_io.h"
#include "runtime/graph_format.h"
#include "runtime/graph_format_internal.h"

namespace weft {

namespace {

// Bounds on untrusted input, far beyond any real graph.
constexpr uint64_t kMaxFileBytes = 4ull << 30;
constexpr int kMaxSubgraphDepth = 16;  // control flow nested this deep
constexpr size_t kMaxNameBytes = 4096;
constexpr unsigned kMaxRank = 64;
// Cap'n Proto's own limits: pointers followed, as a multiple of the message's size (a forged
// message pointing many times at one big list cannot make reading cost more than this), and
// struct nesting (each level of subgraph nests about five structs deep).
constexpr uint64_t kTraversalPerWord = 8;
constexpr int kNestingLimit = 8 * kMaxSubgraphDepth + 32;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void bad(const std::string& what) const {
    throw InvalidArgument("[graph] " + source_ + ": " + what);
  }
  [[noreturn]] void bad_node(const Node& n, const std::string& what) const { bad(n.describe() + ": " + what); }

  void read_variables(capnp::List<proto::VariableDecl>::Reader decls) {
    for (auto d : decls) {
      auto v = std::make_shared<VariableState>();
      v->name = text(d.getName(), "variable name");
      if (v->name.empty()) bad("a variable has an empty name");
      v->dtype = dtype(d.getDtype(), "variable '" + v->name + "'");
      v->shape = shape(d.getShape(), "variable '" + v->name + "'", /*allow_unknown=*/false);
      v->trainable = d.getTrainable();
      variables_.push_back(std::move(v));
    }
  }

  std::shared_ptr<GraphIR> read_graph(proto::Graph::Reader in, int depth) {
    if (depth > kMaxSubgraphDepth)
      bad("control-flow subgraphs nest more than " + std::to_string(kMaxSubgraphDepth) + " deep");
    auto g = std::make_shared<GraphIR>();
    for (auto ref : in.getVariables()) {
      std::string key = text(ref.getName(), "variable key");
      if (ref.getVariable() >= variables_.size())
        bad("variable '" + key + "' refers to entry " + std::to_string(ref.getVariable()) + " of " +
            std::to_string(variables_.size()));
      if (!g->variables.emplace(key, variables_[ref.getVariable()]).second) bad("variable '" + key + "' is listed twice");
    }

    // Nodes first without edges, so that ids are the file's indices (creation order is kept),
    // then the edges once every node exists.
    auto nodes = in.getNodes();
    const uint32_t count = nodes.size();
    for (auto pn : nodes) add_node(*g, pn, depth);
    for (uint32_t i = 0; i < count; ++i) {
      auto pn = nodes[i];
      Node& n = g->node(static_cast<int32_t>(i));
      for (auto e : pn.getInputs()) {
        if (e.getNode() >= count) bad_node(n, "an input points at node " + std::to_string(e.getNode()) + " of " + std::to_string(count));
        n.inputs.push_back({static_cast<int32_t>(e.getNode()), static_cast<int32_t>(std::min<uint32_t>(e.getIndex(), INT32_MAX))});
      }
      for (uint32_t c : pn.getControlInputs()) {
        if (c >= count) bad_node(n, "a control input points at node " + std::to_string(c) + " of " + std::to_string(count));
        if (c == i) bad_node(n, "the node waits for itself");
        if (std::find(n.control_inputs.begin(), n.control_inputs.end(), static_cast<int32_t>(c)) == n.control_inputs.end())
          n.control_inputs.push_back(static_cast<int32_t>(c));
      }
    }
    std::vector<int32_t> order;
    try {
      order = g->topological_order();
    } catch (const InvalidArgument& e) {
      bad(e.what());
    }
    // Stored outputs are only a claim: each node's outputs are inferred from its inputs, in
    // dataflow order, and must agree with it. Executors size buffers from them.
    for (int32_t id : order) check_node(*g, g->node(id), nodes[static_cast<uint32_t>(id)].getOutputs());

    for (uint32_t a : in.getArgs()) {
      if (a >= count) bad("argument points at node " + std::to_string(a) + " of " + std::to_string(count));
      if (g->node(static_cast<int32_t>(a)).type() != "Placeholder")
        bad_node(g->node(static_cast<int32_t>(a)), "is listed as an argument but is not a Placeholder");
      g->args.push_back(static_cast<int32_t>(a));
    }
    for (auto e : in.getResults()) g->results.push_back(endpoint(*g, e.getNode(), e.getIndex(), "a result"));
    for (uint32_t i : in.getInitializers()) {
      if (i >= count) bad("initializer points at node " + std::to_string(i) + " of " + std::to_string(count));
      g->initializers.push_back(static_cast<int32_t>(i));
    }
    return g;
  }

 private:
  std::string text(capnp::Text::Reader t, const char* what) const {
    if (t.size() > kMaxNameBytes) bad(std::string(what) + " is longer than " + std::to_string(kMaxNameBytes) + " bytes");
    return std::string(t.cStr(), t.size());
  }

  DType dtype(proto::DType p, const std::string& where) const {
    DType d;
    if (!graph_format::from_proto(p, d))
      bad(where + ": unknown dtype code " + std::to_string(static_cast<unsigned>(p)) +
          " (written by a newer weft?)");
    return d;
  }

  Shape shape(capnp::List<int64_t>::Reader dims, const std::string& where, bool allow_unknown) const {
    if (dims.size() > kMaxRank) bad(where + ": rank " + std::to_string(dims.size()) + " is above " + std::to_string(kMaxRank));
    std::vector<int64_t> v;
    v.reserve(dims.size());
    for (int64_t d : dims) v.push_back(d);
    for (int64_t d : v)
      if (d < (allow_unknown ? -1 : 0)) bad(where + ": dimension " + std::to_string(d) + " in a shape");
    Shape s(v);
    try {
      s.num_elements();  // overflow check
    } catch (const InvalidArgument&) {
      bad(where + ": shape " + s.to_string() + " has more elements than int64 holds");
    }
    return s;
  }

  Endpoint endpoint(const GraphIR& g, uint32_t node, uint32_t index, const char* what) const {
    if (node >= static_cast<uint32_t>(g.id_bound())) bad(std::string(what) + " points at node " + std::to_string(node));
    const Node& n = g.node(static_cast<int32_t>(node));
    if (index >= n.outputs.size())
      bad(std::string(what) + " reads output " + std::to_string(index) + " of " + n.describe() + ", which has " +
          std::to_string(n.outputs.size()));
    return {static_cast<int32_t>(node), static_cast<int32_t>(index)};
  }

  void add_node(GraphIR& g, proto::Node::Reader pn, int depth) {
    std::string name = text(pn.getName(), "node name");
    if (name.empty()) bad("node " + std::to_string(g.id_bound()) + " has an empty name");
    if (g.find(name)) bad("two nodes are named '" + name + "'");
    std::string op_name = text(pn.getOp(), "op name");
    const OpDef* op = op_registry().find(op_name);
    if (!op) bad("node '" + name + "' has unknown op '" + op_name + "'");
    SourceLoc loc;
    auto pl = pn.getLocation();
    loc.file = text(pl.getFile(), "source file");
    loc.function = text(pl.getFunction(), "source function");
    loc.line = pl.getLine();
    Node& n = g.add_node(*op, {}, {}, {}, name, std::move(loc));
    n.requested_device = text(pn.getRequestedDevice(), "device");
    n.assigned_device = text(pn.getAssignedDevice(), "device");
    for (auto pa : pn.getAttrs()) {
      std::string key = text(pa.getName(), "attribute name");
      if (n.attrs.find(key)) bad_node(n, "attribute '" + key + "' is given twice");
      n.attrs.set(key, attr_value(n, key, pa.getValue(), depth));
    }
  }

  AttrValue attr_value(const Node& n, const std::string& key, proto::Attr::Value::Reader v, int depth) {
    const std::string where = n.describe() + ": attribute '" + key + "'";
    switch (v.which()) {
      case proto::Attr::Value::BOOL: return v.getBool();
      case proto::Attr::Value::INT: return v.getInt();
      case proto::Attr::Value::FLOAT: return v.getFloat();
      case proto::Attr::Value::TYPE: return dtype(v.getType(), where);
      case proto::Attr::Value::SHAPE: return shape(v.getShape(), where, /*allow_unknown=*/true);
      case proto::Attr::Value::INT_LIST: {
        std::vector<int64_t> list;
        list.reserve(v.getIntList().size());
        for (int64_t x : v.getIntList()) list.push_back(x);
        return list;
      }
      case proto::Attr::Value::STRING: return text(v.getString(), "string attribute");
      case proto::Attr::Value::TENSOR: return tensor(v.getTensor(), where);
      case proto::Attr::Value::GRAPH: return GraphAttr(read_graph(v.getGraph(), depth + 1));
    }
    bad(where + " has a kind of value this build does not know (written by a newer weft?)");
  }

  Tensor tensor(proto::TensorValue::Reader t, const std::string& where) const {
    const DType d = dtype(t.getDtype(), where);
    Shape s = shape(t.getShape(), where, /*allow_unknown=*/false);
    auto data = t.getData();
    const uint64_t need = static_cast<uint64_t>(s.num_elements()) * dtype_size(d);  // < 2^29 when it matches
    if (s.num_elements() > (int64_t{1} << 40) || need != data.size())
      bad(where + ": a " + std::string(dtype_name(d)) + s.to_string() + " tensor needs " +
          (s.num_elements() > (int64_t{1} << 40) ? std::string("more") : std::to_string(need)) + " bytes, the file has " +
          std::to_string(data.size()));
    if (d == DType::Bool)
      for (kj::byte b : data)
        if (b > 1) bad(where + ": a bool tensor holds the byte " + std::to_string(b));
    return Tensor::from_host(d, std::move(s), data.begin());
  }

  void check_node(GraphIR& g, Node& n, capnp::List<proto::TensorMeta>::Reader stored) {
    const OpDef& op = *n.op;
    const int nin = static_cast<int>(n.inputs.size());
    if (nin < op.min_inputs || (op.max_inputs >= 0 && nin > op.max_inputs))
      bad_node(n, "has " + std::to_string(nin) + " inputs; " + op.name + " takes " +
                      (op.max_inputs < 0 ? "at least " + std::to_string(op.min_inputs)
                       : op.min_inputs == op.max_inputs
                           ? std::to_string(op.min_inputs)
                           : std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs)));
    for (const AttrSpec& spec : op.attrs) {
      const AttrValue* v = n.attrs.find(spec.name);
      if (!v) {
        if (spec.required) bad_node(n, "lacks the attribute '" + spec.name + "'");
        continue;
      }
      if (attr_type(*v) != spec.type)
        bad_node(n, "attribute '" + spec.name + "' is " + attr_type_name(attr_type(*v)) + ", " + op.name + " wants " +
                        attr_type_name(spec.type));
    }
    for (const auto& [name, value] : n.attrs)
      if (std::none_of(op.attrs.begin(), op.attrs.end(), [&name = name](const AttrSpec& s) { return s.name == name; }))
        bad_node(n, op.name + " has no attribute '" + name + "'");
    if (const AttrValue* var = n.attrs.find("var")) check_variable(g, n, std::get<std::string>(*var));

    std::vector<Tensor> inputs;
    inputs.reserve(n.inputs.size());
    for (const Endpoint& e : n.inputs) {
      const Node& p = g.node(e.node);
      if (e.index >= static_cast<int32_t>(p.outputs.size()))
        bad_node(n, "reads output " + std::to_string(e.index) + " of " + p.describe() + ", which has " +
                        std::to_string(p.outputs.size()));
      const TensorMeta& m = p.outputs[static_cast<size_t>(e.index)];
      inputs.push_back(Tensor::symbolic(m.dtype, m.shape, std::make_unique<SymbolicRef>()));
    }
    InferContext ctx(op, inputs, n.attrs);
    try {
      op.infer(ctx);
    } catch (const Error& e) {
      bad_node(n, e.what());
    } catch (const std::exception& e) {
      bad_node(n, std::string("its shapes cannot be inferred: ") + e.what());
    }
    if (static_cast<int>(stored.size()) != ctx.num_outputs())
      bad_node(n, "the file lists " + std::to_string(stored.size()) + " outputs, " + op.name + " gives " +
                      std::to_string(ctx.num_outputs()));
    n.outputs.clear();
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      const TensorMeta& inferred = ctx.output(i);
      const std::string where = "output " + std::to_string(i);
      const DType d = dtype(stored[static_cast<unsigned>(i)].getDtype(), n.describe() + ": " + where);
      Shape s = shape(stored[static_cast<unsigned>(i)].getShape(), n.describe() + ": " + where, true);
      bool agree = d == inferred.dtype && s.rank() == inferred.shape.rank();
      for (int64_t k = 0; agree && k < s.rank(); ++k)
        agree = s[k] == -1 || inferred.shape[k] == -1 || s[k] == inferred.shape[k];
      if (!agree)
        bad_node(n, where + " is " + std::string(dtype_name(d)) + s.to_string() + " in the file, but its inputs give " +
                        std::string(dtype_name(inferred.dtype)) + inferred.shape.to_string());
      n.outputs.push_back(inferred);
    }
  }

  // A variable node must name a variable of its graph, with the dtype and shape it declares:
  // kernels trust the node's attributes.
  void check_variable(const GraphIR& g, const Node& n, const std::string& key) const {
    auto it = g.variables.find(key);
    if (it == g.variables.end()) bad_node(n, "uses variable '" + key + "', which the graph does not list");
    const VariableState& v = *it->second;
    const DType d = n.attrs.get<DType>("dtype");
    const Shape& s = n.attrs.get<Shape>("shape");
    if (d != v.dtype || s != v.shape)
      bad_node(n, "says variable '" + key + "' is " + std::string(dtype_name(d)) + s.to_string() + ", the file declares " +
                      std::string(dtype_name(v.dtype)) + v.shape.to_string());
  }

  std::string source_;
  std::vector<std::shared_ptr<VariableState>> variables_;
};

}  // namespace

GraphIR decode_graph(std::string_view bytes, std::string_view source) {
  const std::string src(source);
  if (bytes.size() < graph_format::kMagic.size() || bytes.substr(0, graph_format::kMagic.size()) != graph_format::kMagic)
    throw DataLoss("[graph] " + src + " is not a weft graph file (it does not start with \"WEFTGRPH\")");
  bytes.remove_prefix(graph_format::kMagic.size());
  if (bytes.size() % sizeof(capnp::word) != 0)
    throw DataLoss("[graph] " + src + ": the message is " + std::to_string(bytes.size()) +
                   " bytes, not a whole number of 8-byte words (truncated?)");
  // Cap'n Proto reads words in place; copy into aligned memory.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  if (!bytes.empty()) std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * kTraversalPerWord + 1024;
  options.nestingLimit = kNestingLimit;
  try {
    capnp::FlatArrayMessageReader message(words.asPtr(), options);
    if (message.getEnd() != words.end())
      throw DataLoss("[graph] " + src + ": " + std::to_string((words.end() - message.getEnd()) * sizeof(capnp::word)) +
                     " bytes follow the message");
    auto file = message.getRoot<proto::GraphFile>();
    if (file.getMinReaderVersion() > kGraphFormatVersion)
      throw InvalidArgument("[graph] " + src + " was written by a newer weft (graph format " +
                            std::to_string(file.getFormatVersion()) + ", readable from version " +
                            std::to_string(file.getMinReaderVersion()) + "); this build reads format " +
                            std::to_string(kGraphFormatVersion) + " and older");
    if (file.getFormatVersion() == 0) throw DataLoss("[graph] " + src + ": format version 0 (not written by weft)");
    if (!file.hasGraph()) throw DataLoss("[graph] " + src + " holds no graph");
    Reader reader(src);
    reader.read_variables(file.getVariables());
    std::shared_ptr<GraphIR> g = reader.read_graph(file.getGraph(), 0);
    return std::move(*g);
  } catch (const kj::Exception& e) {
    throw DataLoss("[graph] " + src + " is damaged: " + std::string(e.getDescription().cStr()));
  }
}

GraphIR load_graph(const std::string& path) { return decode_graph(read_file(path, kMaxFileBytes, "graph"), path); }

}  // namespace weft
