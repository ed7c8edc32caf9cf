// Partitioning: the Send/Recv structure, rendezvous keys, args/results/variables mapping, and
// random placed graphs whose partitions account for every edge and compute the same results
// when run one device after another with an in-test mailbox standing in for the rendezvous.
#include "scheduler/passes/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "pass_test_util.h"
#include "random_dag_util.h"
#include "runtime/rendezvous.h"
#include "scheduler/executor.h"
#include "scheduler/passes/place.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

std::string dev(int i) { return local_device_name(DeviceType::CPU, i); }

std::vector<int32_t> of_type(const GraphIR& g, const std::string& type) {
  std::vector<int32_t> ids;
  for (int32_t id : g.node_ids())
    if (g.node(id).type() == type) ids.push_back(id);
  return ids;
}

// Each partition: topologically sortable, every node on the partition's device, and each Send
// paired with exactly one Recv of the same key on the key's destination.
void expect_valid(const PartitionResult& p) {
  std::map<std::string, int> sends, recvs;
  for (const Partition& part : p.partitions) {
    const GraphIR& g = part.graph;
    EXPECT_NO_THROW(g.topological_order()) << part.device;
    for (int32_t id : g.node_ids()) {
      const Node& n = g.node(id);
      EXPECT_EQ(n.assigned_device, part.device) << n.name;
      for (const Endpoint& e : n.inputs) EXPECT_TRUE(g.alive(e.node)) << n.name;
      for (int32_t c : n.control_inputs) EXPECT_TRUE(g.alive(c)) << n.name;
      if (n.type() != "Send" && n.type() != "Recv") continue;
      const RendezvousKey parts = rendezvous_key_of(n.attrs, 0);  // validates every field
      EXPECT_EQ(RendezvousKey::parse(parts.to_string()), parts);
      EXPECT_NE(parts.src_device, parts.dst_device);
      const std::string key = parts.to_string();
      if (n.type() == "Send") {
        EXPECT_EQ(parts.src_device, part.device);
        ++sends[key];
      } else {
        EXPECT_EQ(parts.dst_device, part.device);
        ++recvs[key];
      }
    }
  }
  EXPECT_EQ(sends, recvs);
  for (const auto& [key, count] : sends) EXPECT_EQ(count, 1) << key;
  EXPECT_EQ(static_cast<int>(sends.size()), p.num_sends);
}

TEST(Partition, OneRecvPerTensorAndDestinationHoweverManyConsumers) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t neg = add(g, "Neg", {{x, 0}}, {}, "neg");
  int32_t here = add(g, "Abs", {{neg, 0}}, {}, "here");
  int32_t r1 = add(g, "Relu", {{neg, 0}}, {}, "r1");
  int32_t r2 = add(g, "Square", {{neg, 0}}, {}, "r2");
  int32_t r3 = add(g, "Add", {{neg, 0}, {neg, 0}}, {}, "r3");
  g.args = {x};
  g.results = {{here, 0}, {r1, 0}, {r2, 0}, {r3, 0}};
  for (int32_t id : {x, neg, here}) g.node(id).assigned_device = dev(0);
  for (int32_t id : {r1, r2, r3}) g.node(id).assigned_device = dev(1);

  PartitionResult p = partition(g, {.incarnation = 0xdeadbeef});
  ASSERT_EQ(p.partitions.size(), 2u);
  expect_valid(p);
  const GraphIR& g0 = p.partitions[static_cast<size_t>(p.find(dev(0)))].graph;
  const GraphIR& g1 = p.partitions[static_cast<size_t>(p.find(dev(1)))].graph;
  ASSERT_EQ(of_type(g0, "Send").size(), 1u);
  EXPECT_TRUE(of_type(g0, "Recv").empty());
  ASSERT_EQ(of_type(g1, "Recv").size(), 1u);
  EXPECT_TRUE(of_type(g1, "Send").empty());
  EXPECT_EQ(p.num_sends, 1);

  const int32_t recv = of_type(g1, "Recv")[0];
  for (const char* name : {"r1", "r2", "r3"})
    for (const Endpoint& e : g1.find(name)->inputs) EXPECT_EQ(e, (Endpoint{recv, 0})) << name;
  const Node& send = g0.node(of_type(g0, "Send")[0]);
  EXPECT_EQ(send.inputs[0], (Endpoint{g0.find("neg")->id, 0}));
  const RendezvousKey key = rendezvous_key_of(send.attrs, 7);
  EXPECT_EQ(key, (RendezvousKey{dev(0), 0xdeadbeef, dev(1), "neg:0", 7}));
  EXPECT_EQ(key.to_string(), dev(0) + ";00000000deadbeef;" + dev(1) + ";neg:0;7");
  EXPECT_EQ(send.attrs.get<int64_t>("send_device_incarnation"), 0xdeadbeef);
  EXPECT_EQ(g1.node(recv).outputs[0].shape, Shape{4});
  EXPECT_EQ(rendezvous_key_of(g1.node(recv).attrs, 7), key);

  // Args and results map onto the partitions that own them.
  ASSERT_EQ(p.args.size(), 1u);
  EXPECT_EQ(p.args[0].partition, p.find(dev(0)));
  EXPECT_EQ(g0.args[static_cast<size_t>(p.args[0].index)], g0.find("x")->id);
  ASSERT_EQ(p.results.size(), 4u);
  const std::vector<std::pair<int, std::string>> owners = {{0, "here"}, {1, "r1"}, {1, "r2"}, {1, "r3"}};
  for (size_t i = 0; i < owners.size(); ++i) {
    const PartitionSlot& s = p.results[i];
    EXPECT_EQ(s.partition, p.find(dev(owners[i].first)));
    const GraphIR& owner = p.partitions[static_cast<size_t>(s.partition)].graph;
    EXPECT_EQ(owner.results[static_cast<size_t>(s.index)].node, owner.find(owners[i].second)->id);
  }
  EXPECT_EQ(p.nodes[static_cast<size_t>(r2)].partition, p.find(dev(1)));
  EXPECT_EQ(p.nodes[static_cast<size_t>(r2)].index, g1.find("r2")->id);
}

TEST(Partition, AControlEdgeAcrossDevicesIsCarriedByATinyTensor) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");
  int32_t b = add(g, "Relu", {{x, 0}}, {}, "b");
  int32_t c = add(g, "Abs", {{x, 0}}, {}, "c");
  g.add_control_input(b, a);
  g.add_control_input(c, a);  // a second consumer there: still one transfer
  g.node(x).assigned_device = dev(0);
  g.node(a).assigned_device = dev(0);
  g.node(b).assigned_device = dev(1);
  g.node(c).assigned_device = dev(1);
  PartitionResult p = partition(g, {.incarnation = 1, .incarnations = {{dev(0), 42}}});
  expect_valid(p);
  EXPECT_EQ(p.num_sends, 2);  // x's value and a's control
  const GraphIR& g0 = p.partitions[static_cast<size_t>(p.find(dev(0)))].graph;
  const GraphIR& g1 = p.partitions[static_cast<size_t>(p.find(dev(1)))].graph;

  int32_t control_send = -1;
  for (int32_t s : of_type(g0, "Send"))
    if (g0.node(s).attrs.get<std::string>("tensor_name") == "^a") control_send = s;
  ASSERT_GE(control_send, 0);
  const Node& token = g0.node(g0.node(control_send).inputs[0].node);
  EXPECT_EQ(token.type(), "Const");
  EXPECT_EQ(token.outputs[0].shape.num_elements(), 1);
  EXPECT_EQ(token.control_inputs, std::vector<int32_t>{g0.find("a")->id});
  EXPECT_EQ(g0.node(control_send).attrs.get<int64_t>("send_device_incarnation"), 42);

  for (const char* name : {"b", "c"}) {
    const Node& n = *g1.find(name);
    ASSERT_EQ(n.control_inputs.size(), 1u) << name;
    const Node& recv = g1.node(n.control_inputs[0]);
    EXPECT_EQ(recv.type(), "Recv");
    EXPECT_EQ(recv.attrs.get<std::string>("tensor_name"), "^a");
  }
}

TEST(Partition, InsertedNamesNeverClashWithTheGraphs) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t y = add(g, "Neg", {{x, 0}}, {}, "y");
  // Named as the Send and Recv of x:0 would be, and created after them in its partition.
  int32_t s = add(g, "Relu", {{y, 0}}, {}, "_send_x_0_to_localhost_task0_CPU1");
  int32_t r = add(g, "Abs", {{y, 0}}, {}, "_recv_x_0_from_localhost_task0_CPU0");
  g.node(x).assigned_device = dev(0);
  for (int32_t id : {y, s, r}) g.node(id).assigned_device = id == y ? dev(1) : dev(0);
  PartitionResult p = partition(g);
  expect_valid(p);
  for (const char* name : {"_send_x_0_to_localhost_task0_CPU1", "_recv_x_0_from_localhost_task0_CPU0"})
    EXPECT_EQ(p.partitions[static_cast<size_t>(p.find(dev(0)))].graph.find(name)->type(), name[1] == 's' ? "Relu" : "Abs");
}

TEST(Partition, UnplacedNodesAreAnError) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  add(g, "Neg", {{x, 0}}, {}, "lost");
  g.node(x).assigned_device = dev(0);
  try {
    partition(g);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node 'lost'"), std::string::npos) << e.what();
  }
}

TEST(Partition, VariablesAndSubgraphsStayWithTheirNodes) {
  auto v = std::make_shared<VariableState>();
  v->dtype = float32;
  v->shape = Shape{};
  auto w = std::make_shared<VariableState>();
  w->dtype = float32;
  w->shape = Shape{};
  auto branch = [&](bool reads) {
    auto b = std::make_shared<GraphIR>();
    int32_t arg = placeholder(*b, float32, {}, "arg");
    b->args = {arg};
    if (reads) {
      b->variables["w_here"] = w;
      int32_t r = add(*b, "ReadVariable", {}, {{"var", std::string("w_here")}, {"dtype", float32}, {"shape", Shape{}}});
      b->results = {{add(*b, "Add", {{arg, 0}, {r, 0}}), 0}};
    } else {
      b->results = {{add(*b, "Neg", {{arg, 0}}), 0}};
    }
    return b;
  };
  GraphIR g;
  g.variables["v"] = v;
  g.variables["w"] = w;
  int32_t p = placeholder(g, bool_, {}, "p");
  int32_t x = placeholder(g, float32, {}, "x");
  int32_t read = add(g, "ReadVariable", {}, {{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{}}}, "read_v");
  auto then_g = branch(true);
  int32_t cond = add(g, "If", {{p, 0}, {x, 0}}, {{"then_branch", GraphAttr(then_g)}, {"else_branch", GraphAttr(branch(false))}},
                     "cond");
  int32_t sum = add(g, "Add", {{cond, 0}, {read, 0}}, {}, "sum");
  g.args = {p, x};
  g.results = {{sum, 0}};
  g.initializers = {read};
  for (int32_t id : {p, x, cond}) g.node(id).assigned_device = dev(1);
  for (int32_t id : {read, sum}) g.node(id).assigned_device = dev(0);
  PartitionResult r = partition(g);
  expect_valid(r);
  const GraphIR& g0 = r.partitions[static_cast<size_t>(r.find(dev(0)))].graph;
  const GraphIR& g1 = r.partitions[static_cast<size_t>(r.find(dev(1)))].graph;
  EXPECT_EQ(g0.variables.size(), 1u);
  EXPECT_EQ(g0.variables.at("v"), v);
  EXPECT_EQ(g1.variables.size(), 1u);
  EXPECT_EQ(g1.variables.at("w"), w);
  EXPECT_EQ(g0.initializers, std::vector<int32_t>{g0.find("read_v")->id});
  EXPECT_TRUE(g1.initializers.empty());
  EXPECT_EQ(g1.find("cond")->attrs.get<GraphAttr>("then_branch"), then_g);  // shared, whole
  EXPECT_EQ(g1.args.size(), 2u);
  EXPECT_TRUE(g0.args.empty());
}

// Runs each partition with the executor, each Recv replaced by a Const of what its Send put in
// an in-test mailbox (keyed by rendezvous key), each Send's input fetched into the mailbox; the
// devices in an order where every Recv's Send ran before.
std::vector<Tensor> run_partitions(const PartitionResult& p, std::span<const Tensor> args) {
  static const OpDef& const_op = op_def("Const");
  std::map<std::string, Tensor> mailbox;
  std::vector<Tensor> results(p.results.size());
  std::vector<bool> done(p.partitions.size(), false);
  for (size_t round = 0; round < p.partitions.size(); ++round) {
    for (size_t i = 0; i < p.partitions.size(); ++i) {
      if (done[i]) continue;
      auto g = std::make_shared<GraphIR>(p.partitions[i].graph.clone());
      ExecutorSpec spec;
      std::vector<Tensor> feeds;
      bool ready = true;
      for (size_t a = 0; a < p.args.size(); ++a)
        if (p.args[a].partition == static_cast<int>(i)) {
          spec.feeds.push_back({g->args[static_cast<size_t>(p.args[a].index)], 0});
          feeds.push_back(args[a]);
        }
      std::vector<std::string> sent;
      for (int32_t id : g->node_ids()) {
        Node& n = g->node(id);
        n.assigned_device.clear();  // this process has one CPU: the partitions take turns on it
        if (n.type() == "Recv") {
          auto it = mailbox.find(rendezvous_key_of(n.attrs, 0).to_string());
          if (it == mailbox.end()) {
            ready = false;
            break;
          }
          n.op = &const_op;
          n.attrs = {{"value", it->second}};
        } else if (n.type() == "Send") {
          spec.fetches.push_back(n.inputs[0]);
          sent.push_back(rendezvous_key_of(n.attrs, 0).to_string());
        }
      }
      if (!ready) continue;
      const size_t first_result = spec.fetches.size();
      spec.fetches.insert(spec.fetches.end(), g->results.begin(), g->results.end());
      std::vector<Tensor> out = Executor(g, spec).run(feeds);
      for (size_t s = 0; s < sent.size(); ++s) mailbox[sent[s]] = out[s];
      for (size_t r = 0; r < p.results.size(); ++r)
        if (p.results[r].partition == static_cast<int>(i))
          results[r] = out[first_result + static_cast<size_t>(p.results[r].index)];
      done[i] = true;
    }
  }
  for (bool d : done) EXPECT_TRUE(d) << "a partition waited on a Recv no partition sent";
  return results;
}

// Every original edge is in the partitions: within a device, as an edge between the same nodes;
// across devices, through a Recv of the producer's tensor fed by a Send reading the producer.
void expect_every_edge_accounted_for(const GraphIR& g, const PartitionResult& p) {
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    const PartitionSlot here = p.nodes[static_cast<size_t>(id)];
    const GraphIR& part = p.partitions[static_cast<size_t>(here.partition)].graph;
    const Node& m = part.node(here.index);
    ASSERT_EQ(m.name, n.name);
    ASSERT_EQ(m.inputs.size(), n.inputs.size());
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const Endpoint e = n.inputs[s];
      const PartitionSlot producer = p.nodes[static_cast<size_t>(e.node)];
      if (producer.partition == here.partition) {
        EXPECT_EQ(m.inputs[s], (Endpoint{producer.index, e.index}));
        continue;
      }
      const Node& recv = part.node(m.inputs[s].node);
      ASSERT_EQ(recv.type(), "Recv") << n.name;
      EXPECT_EQ(recv.attrs.get<std::string>("tensor_name"), g.endpoint_name(e));
      const GraphIR& from = p.partitions[static_cast<size_t>(producer.partition)].graph;
      bool found = false;
      for (int32_t sid : from.node_ids()) {
        const Node& send = from.node(sid);
        if (send.type() == "Send" && rendezvous_key_of(send.attrs, 0) == rendezvous_key_of(recv.attrs, 0)) {
          EXPECT_EQ(send.inputs[0], (Endpoint{producer.index, e.index}));
          found = true;
        }
      }
      EXPECT_TRUE(found) << g.endpoint_name(e) << " -> " << n.name;
    }
    for (int32_t c : n.control_inputs) {
      const PartitionSlot producer = p.nodes[static_cast<size_t>(c)];
      const bool kept = producer.partition == here.partition
                            ? std::ranges::find(m.control_inputs, producer.index) != m.control_inputs.end()
                            : std::ranges::any_of(m.control_inputs, [&](int32_t r) {
                                return part.node(r).type() == "Recv" &&
                                       part.node(r).attrs.get<std::string>("tensor_name") == "^" + g.node(c).name;
                              });
      EXPECT_TRUE(kept) << g.node(c).name << " -> " << n.name;
    }
  }
}

TEST(Partition, RandomPlacementsPartitionIntoValidSubgraphs) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    GraphIR g = testing::random_dag(rng, 30 + trial * 5, /*control_edges=*/true);
    const int devices = 1 + trial % 4;
    for (int32_t id : g.node_ids()) g.node(id).assigned_device = dev(static_cast<int>(rng() % devices));
    PartitionResult p = partition(g);
    expect_valid(p);
    expect_every_edge_accounted_for(g, p);
    int nodes = 0;
    for (const Partition& part : p.partitions) nodes += part.graph.num_nodes();
    // Each original node once, plus a Send and a Recv per transfer and a token per control one.
    int controls = 0;
    for (const Partition& part : p.partitions)
      for (int32_t id : of_type(part.graph, "Send")) controls += part.graph.node(id).attrs.get<std::string>("tensor_name")[0] == '^';
    EXPECT_EQ(nodes, g.num_nodes() + 2 * p.num_sends + controls);
  }
}

TEST(Partition, PartitionsRunOneAfterAnotherGiveTheSameResults) {
  std::mt19937 rng(5);
  const Tensor a = Tensor::from_host(float32, {8, 8}, std::vector<float>(64, 0.3f).data());
  std::vector<float> bv(64);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = std::sin(static_cast<float>(i));
  const Tensor b = Tensor::from_host(float32, {8, 8}, bv.data());
  const std::vector<Tensor> args = {a, b};
  for (int trial = 0; trial < 12; ++trial) {
    GraphIR g = testing::random_dag(rng, 40, /*control_edges=*/true);
    const auto expected = testing::floats(testing::run_body(g, args));
    // Devices non-decreasing along the creation order: the partitions can run one after another.
    const int devices = 1 + trial % 4;
    const std::vector<int32_t> ids = g.node_ids();
    for (size_t i = 0; i < ids.size(); ++i)
      g.node(ids[i]).assigned_device = dev(static_cast<int>(i * static_cast<size_t>(devices) / ids.size()));
    PartitionResult p = partition(g);
    expect_valid(p);
    EXPECT_EQ(testing::floats(run_partitions(p, args)), expected) << "trial " << trial;
  }
}

TEST(Partition, PlacedGraphsPartitionAndRunTheSame) {
  std::mt19937 rng(3);
  const Tensor a = Tensor::from_host(float32, {8, 8}, std::vector<float>(64, -0.7f).data());
  const Tensor b = Tensor::from_host(float32, {8, 8}, std::vector<float>(64, 0.2f).data());
  const std::vector<Tensor> args = {a, b};
  for (int trial = 0; trial < 8; ++trial) {
    GraphIR g = testing::random_dag(rng, 50, /*control_edges=*/false);
    const auto expected = testing::floats(testing::run_body(g, args));
    std::vector<PlacementDevice> devices;
    for (int i = 0; i < 4; ++i) devices.push_back({dev(i), DeviceType::CPU});
    place(g, devices);
    PartitionResult p = partition(g);
    expect_valid(p);
    expect_every_edge_accounted_for(g, p);
    // A placement may send tensors back and forth between two devices; run the partitions
    // sequentially only when the device order allows it.
    bool acyclic = true;
    for (int32_t id : g.node_ids())
      for (const Endpoint& e : g.node(id).inputs) acyclic &= g.node(e.node).assigned_device <= g.node(id).assigned_device;
    if (acyclic) {
      EXPECT_EQ(testing::floats(run_partitions(p, args)), expected) << "trial " << trial;
    }
  }
}

TEST(RendezvousKey, TransferNodesWithBadKeyPartsAreRejected) {
  Attrs a{{"send_device", dev(0)}, {"send_device_incarnation", int64_t{5}}, {"recv_device", dev(1)}, {"tensor_name", "x:0"}};
  EXPECT_EQ(rendezvous_key_of(a, 3).to_string(), dev(0) + ";0000000000000005;" + dev(1) + ";x:0;3");
  Attrs short_name = a;
  short_name.set("recv_device", std::string("/cpu:1"));  // keys hold full device names only
  EXPECT_THROW(rendezvous_key_of(short_name, 3), InvalidArgument);
  Attrs semicolon = a;
  semicolon.set("tensor_name", std::string("x;0"));
  EXPECT_THROW(rendezvous_key_of(semicolon, 3), InvalidArgument);
  EXPECT_THROW(rendezvous_key_of(a, -1), InvalidArgument);
}

}  // namespace
}  // namespace weft
