// Writing graph files: GraphIR -> Cap'n Proto (runtime/proto/graph.capnp).
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <map>
#include <vector>

#include "runtime/error.h"
#include "runtime/file_io.h"
#include "runtime/graph_format.h"
#include "runtime/graph_format_internal.h"

namespace weft {

namespace {

using graph_format::to_proto;

void write_dims(capnp::List<int64_t>::Builder out, const Shape& s) {
  for (int64_t i = 0; i < s.rank(); ++i) out.set(static_cast<unsigned>(i), s[i]);
}

class Writer {
 public:
  explicit Writer(proto::GraphFile::Builder file) : file_(file) {}

  void write_graph(const GraphIR& g, proto::Graph::Builder out) {
    // Ids with holes (removed nodes) become consecutive indices, in creation order.
    const std::vector<int32_t> ids = g.node_ids();
    std::vector<uint32_t> index(static_cast<size_t>(g.id_bound()), 0);
    for (size_t i = 0; i < ids.size(); ++i) index[static_cast<size_t>(ids[i])] = static_cast<uint32_t>(i);
    auto endpoint = [&](proto::Endpoint::Builder b, Endpoint e) {
      b.setNode(index.at(static_cast<size_t>(e.node)));
      b.setIndex(static_cast<uint32_t>(e.index));
    };

    // Variables before nodes: the outermost graph names a variable before any subgraph does.
    auto vars = out.initVariables(static_cast<unsigned>(g.variables.size()));
    unsigned k = 0;
    for (const auto& [name, state] : g.variables) {
      vars[k].setName(name);
      vars[k].setVariable(variable_index(name, state));
      ++k;
    }

    auto nodes = out.initNodes(static_cast<unsigned>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) write_node(g.node(ids[i]), nodes[static_cast<unsigned>(i)], endpoint, index);

    auto args = out.initArgs(static_cast<unsigned>(g.args.size()));
    for (size_t i = 0; i < g.args.size(); ++i) args.set(static_cast<unsigned>(i), index.at(static_cast<size_t>(g.args[i])));
    auto results = out.initResults(static_cast<unsigned>(g.results.size()));
    for (size_t i = 0; i < g.results.size(); ++i) endpoint(results[static_cast<unsigned>(i)], g.results[i]);
    auto inits = out.initInitializers(static_cast<unsigned>(g.initializers.size()));
    for (size_t i = 0; i < g.initializers.size(); ++i)
      inits.set(static_cast<unsigned>(i), index.at(static_cast<size_t>(g.initializers[i])));
  }

  // The file-wide table of variables, filled as graphs refer to them.
  void finish() {
    auto decls = file_.initVariables(static_cast<unsigned>(states_.size()));
    for (size_t i = 0; i < states_.size(); ++i) {
      const VariableState& v = *states_[i];
      auto d = decls[static_cast<unsigned>(i)];
      d.setName(names_[i]);
      d.setDtype(to_proto(v.dtype));
      write_dims(d.initShape(static_cast<unsigned>(v.shape.rank())), v.shape);
      d.setTrainable(v.trainable);
    }
  }

 private:
  template <class EndpointFn>
  void write_node(const Node& n, proto::Node::Builder b, EndpointFn& endpoint, const std::vector<uint32_t>& index) {
    b.setName(n.name);
    b.setOp(n.type());
    auto inputs = b.initInputs(static_cast<unsigned>(n.inputs.size()));
    for (size_t i = 0; i < n.inputs.size(); ++i) endpoint(inputs[static_cast<unsigned>(i)], n.inputs[i]);
    auto control = b.initControlInputs(static_cast<unsigned>(n.control_inputs.size()));
    for (size_t i = 0; i < n.control_inputs.size(); ++i)
      control.set(static_cast<unsigned>(i), index.at(static_cast<size_t>(n.control_inputs[i])));
    auto attrs = b.initAttrs(static_cast<unsigned>(n.attrs.size()));
    unsigned k = 0;
    for (const auto& [name, value] : n.attrs) write_attr(n, name, value, attrs[k++]);
    auto outputs = b.initOutputs(static_cast<unsigned>(n.outputs.size()));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      outputs[static_cast<unsigned>(i)].setDtype(to_proto(n.outputs[i].dtype));
      const Shape& s = n.outputs[i].shape;
      write_dims(outputs[static_cast<unsigned>(i)].initShape(static_cast<unsigned>(s.rank())), s);
    }
    b.setRequestedDevice(n.requested_device);
    b.setAssignedDevice(n.assigned_device);
    auto loc = b.initLocation();
    loc.setFile(n.loc.file);
    loc.setFunction(n.loc.function);
    loc.setLine(n.loc.line);
  }

  void write_attr(const Node& n, const std::string& name, const AttrValue& value, proto::Attr::Builder b) {
    b.setName(name);
    auto v = b.initValue();
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>) {
            v.setBool(x);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            v.setInt(x);
          } else if constexpr (std::is_same_v<T, double>) {
            v.setFloat(x);
          } else if constexpr (std::is_same_v<T, DType>) {
            v.setType(to_proto(x));
          } else if constexpr (std::is_same_v<T, Shape>) {
            write_dims(v.initShape(static_cast<unsigned>(x.rank())), x);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            auto list = v.initIntList(static_cast<unsigned>(x.size()));
            for (size_t i = 0; i < x.size(); ++i) list.set(static_cast<unsigned>(i), x[i]);
          } else if constexpr (std::is_same_v<T, std::string>) {
            v.setString(x);
          } else if constexpr (std::is_same_v<T, Tensor>) {
            write_tensor(n, name, x, v.initTensor());
          } else {
            if (!x) throw InvalidArgument("[graph] " + n.describe() + ": attribute '" + name + "' is an empty graph");
            write_graph(*x, v.initGraph());
          }
        },
        value);
  }

  void write_tensor(const Node& n, const std::string& attr, const Tensor& t, proto::TensorValue::Builder b) {
    if (!t.defined() || t.is_symbolic())
      throw InvalidArgument("[graph] " + n.describe() + ": attribute '" + attr + "' is not a concrete tensor");
    // A Data blob holds fewer than 2^29 bytes; larger constants belong in variables.
    constexpr size_t kMaxBlob = (size_t{1} << 29) - 1;
    if (t.nbytes() > kMaxBlob)
      throw InvalidArgument("[graph] " + n.describe() + ": constant '" + attr + "' has " + std::to_string(t.nbytes()) +
                            " bytes; a graph file holds constants below 512 MiB (make it a Variable)");
    b.setDtype(to_proto(t.dtype()));
    write_dims(b.initShape(static_cast<unsigned>(t.rank())), t.shape());
    auto data = b.initData(static_cast<unsigned>(t.nbytes()));
    if (t.nbytes()) t.copy_to_host(data.begin());
  }

  unsigned variable_index(const std::string& key, const std::shared_ptr<VariableState>& state) {
    auto [it, fresh] = index_.try_emplace(state.get(), static_cast<unsigned>(states_.size()));
    if (fresh) {
      states_.push_back(state);
      // The first graph to mention a variable is the outermost one: its key names the variable
      // in the file, and in a saved model's values file.
      names_.push_back(key);
    }
    return it->second;
  }

  proto::GraphFile::Builder file_;
  std::map<const VariableState*, unsigned> index_;
  std::vector<std::shared_ptr<VariableState>> states_;
  std::vector<std::string> names_;
};

}  // namespace

std::string encode_graph(const GraphIR& g) {
  capnp::MallocMessageBuilder message;
  auto file = message.initRoot<proto::GraphFile>();
  file.setFormatVersion(kGraphFormatVersion);
  file.setMinReaderVersion(1);
  Writer w(file);
  w.write_graph(g, file.initGraph());
  w.finish();
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  std::string out(graph_format::kMagic);
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  return out;
}

void save_graph(const std::string& path, const GraphIR& g) {
  const std::string bytes = encode_graph(g);
  write_file_atomically(path, {{bytes.data(), bytes.size()}}, "graph");
}

}  // namespace weft
