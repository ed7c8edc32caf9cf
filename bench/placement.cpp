// Graph compilation at scale: placement over 4 devices and partitioning of generated graphs of
// 1k, 10k and 100k nodes, and the optimisation passes (constant folding, pruning, CSE, fusion)
// on graphs of the same sizes. Goal: 100k nodes placed and partitioned in under a second, and
// time growing no faster than n log n (the per-node column stays roughly flat).
// Then the cost of an edge between two logical CPUs of this process (a Send/Recv pair through the
// rendezvous, goal: <= 1 us above the same edge on one device), measured on a chain whose nodes
// alternate between /cpu:0 and /cpu:1 against the same chain on /cpu:0.
// There is no peer in this run: TensorFlow's placer and partitioner are not installed here.
// Pass --quick to stop at 10k nodes, --placement-only to skip the passes and the edge.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "bench/bench_util.h"
#include "runtime/device.h"
#include "runtime/device_name.h"
#include "runtime/graph.h"
#include "scheduler/graph_compiler.h"
#include "scheduler/passes/constant_fold.h"
#include "scheduler/passes/cse.h"
#include "scheduler/passes/fuse_elementwise.h"
#include "scheduler/passes/partition.h"
#include "scheduler/passes/place.h"
#include "scheduler/passes/prune.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

int32_t add(GraphIR& g, const OpDef& op, std::vector<Endpoint> inputs, Attrs attrs = {}) {
  std::vector<Tensor> stand_ins;
  for (const Endpoint& e : inputs) {
    const TensorMeta& m = g.meta(e);
    stand_ins.push_back(Tensor::symbolic(m.dtype, m.shape, nullptr));
  }
  InferContext ic(op, stand_ins, attrs);
  op.infer(ic);
  std::vector<TensorMeta> outs;
  for (int i = 0; i < ic.num_outputs(); ++i) outs.push_back(ic.output(i));
  return g.add_node(op, std::move(inputs), std::move(attrs), std::move(outs), "").id;
}

// A model-like graph: [64, 64] activations through matmuls and elementwise ops, each node reading
// recent nodes (so there is both depth and parallel width), 1 in 50 nodes reading one of 40
// variables (colocation groups) and 1 in 100 asking for a device.
GraphIR model_graph(int n, std::mt19937& rng) {
  static const OpDef& placeholder = op_def("Placeholder");
  static const OpDef& read = op_def("ReadVariable");
  static const OpDef* unary[] = {&op_def("Relu"), &op_def("Tanh"), &op_def("Neg")};
  static const OpDef* binary[] = {&op_def("Add"), &op_def("Mul"), &op_def("MatMul")};
  GraphIR g;
  const Shape shape{64, 64};
  for (int v = 0; v < 40; ++v) {
    auto state = std::make_shared<VariableState>();
    state->shape = shape;
    g.variables["v" + std::to_string(v)] = state;
  }
  std::vector<int32_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(add(g, placeholder, {}, {{"dtype", float32}, {"shape", shape}}));
    g.args.push_back(ids.back());
  }
  auto recent = [&] { return ids[ids.size() - 1 - rng() % std::min<size_t>(ids.size(), 64)]; };
  while (static_cast<int>(ids.size()) < n) {
    const unsigned r = rng() % 100;
    int32_t id;
    if (r < 2) {
      id = add(g, read, {}, {{"var", "v" + std::to_string(rng() % 40)}, {"dtype", float32}, {"shape", shape}});
    } else if (r < 40) {
      id = add(g, *unary[rng() % 3], {{recent(), 0}});
    } else {
      id = add(g, *binary[rng() % 3], {{recent(), 0}, {recent(), 0}});
    }
    // (Not on a variable's reads: two of those asking for different devices are an error.)
    if (r >= 2 && rng() % 100 == 0) g.node(id).requested_device = "/cpu:" + std::to_string(rng() % 4);
    ids.push_back(id);
  }
  for (int i = 0; i < 16; ++i) g.results.push_back({recent(), 0});
  return g;
}

// Half of it foldable: chains over constants, mixed into chains over placeholders, with a
// duplicate of every tenth node (for CSE) and elementwise runs (for fusion).
GraphIR foldable_graph(int n, std::mt19937& rng) {
  static const OpDef& placeholder = op_def("Placeholder");
  static const OpDef& constant = op_def("Const");
  static const OpDef* ops[] = {&op_def("Add"), &op_def("Mul"), &op_def("Sub")};
  static const OpDef& relu = op_def("Relu");
  GraphIR g;
  std::vector<int32_t> live, folded;
  for (int i = 0; i < 2; ++i) {
    live.push_back(add(g, placeholder, {}, {{"dtype", float32}, {"shape", Shape{4}}}));
    g.args.push_back(live.back());
  }
  const float values[4] = {1, 2, 3, 4};
  for (int i = 0; i < 8; ++i) folded.push_back(add(g, constant, {}, {{"value", Tensor::from_host(float32, {4}, values)}}));
  int count = 10;
  while (count < n) {
    const bool fold = rng() % 2 == 0;
    std::vector<int32_t>& pool = fold ? folded : live;
    auto pick = [&](const std::vector<int32_t>& p) { return p[p.size() - 1 - rng() % std::min<size_t>(p.size(), 16)]; };
    const OpDef& op = *ops[rng() % 3];
    const int32_t a = pick(pool), b = pick(fold ? folded : (rng() % 2 ? live : folded));
    int32_t id = add(g, op, {{a, 0}, {b, 0}});
    ++count;
    if (rng() % 10 == 0) {
      add(g, op, {{a, 0}, {b, 0}});  // a duplicate
      ++count;
    }
    if (!fold && rng() % 3 == 0) {
      id = add(g, relu, {{id, 0}});
      ++count;
    }
    pool.push_back(id);
  }
  for (int i = 0; i < 8; ++i) g.results.push_back({live[live.size() - 1 - static_cast<size_t>(i)], 0});
  for (int i = 0; i < 8; ++i) g.results.push_back({folded[folded.size() - 1 - static_cast<size_t>(i)], 0});
  return g;
}

template <class F>
double seconds_of(F&& f, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::string time_text(double s) { return s < 1e-3 ? fmt("%.1f us", s * 1e6) : fmt("%.2f ms", s * 1e3); }

// x -> neg -> neg -> ... (`length` nodes), node i requesting /cpu:(i % devices).
GraphIR chain(int length, int devices) {
  static const OpDef& placeholder = op_def("Placeholder");
  static const OpDef& neg = op_def("Neg");
  GraphIR g;
  int32_t last = add(g, placeholder, {}, {{"dtype", float32}, {"shape", Shape{16}}});
  g.args.push_back(last);
  for (int i = 0; i < length; ++i) {
    last = add(g, neg, {{last, 0}});
    g.node(last).requested_device = "/cpu:" + std::to_string(i % devices);
  }
  g.results.push_back({last, 0});
  return g;
}

void cross_device_edge_table() {
  constexpr int kLength = 64;
  auto compile = [](int devices) {
    GraphIR g = chain(kLength, devices);
    CompileSpec spec{.feeds = {{g.args[0], 0}}, .fetches = g.results};
    return CompiledGraph(std::move(g), std::move(spec), {.optimize = false});
  };
  const CompiledGraph same = compile(1), cross = compile(2);
  const Tensor x = Tensor::from_host(float32, {16}, std::vector<float>(16, 1.f).data());
  std::vector<Tensor> out;
  const auto [t_same, t_cross] = weft::bench::seconds_per_call_paired([&] { out = same.run_checked_feeds({&x, 1}); },
                                                                      [&] { out = cross.run_checked_feeds({&x, 1}); },
                                                                      2000);
  const int edges = kLength - 1;
  std::vector<Row> rows;
  rows.push_back({"chain of " + std::to_string(kLength) + " neg, one device", time_text(t_same), "-",
                  fmt("%.3f us/node", t_same / kLength * 1e6), std::to_string(same.num_partitions()) + " partition"});
  rows.push_back({"chain of " + std::to_string(kLength) + " neg, alternating 2 CPUs", time_text(t_cross), "-",
                  fmt("%.3f us/node", t_cross / kLength * 1e6),
                  std::to_string(cross.num_partitions()) + " partitions, " + std::to_string(edges) + " Send/Recv"});
  rows.push_back({"  cost of one cross-device edge", fmt("%.3f us", (t_cross - t_same) / edges * 1e6), "-", "-",
                  "goal <= 1 us"});
  weft::bench::print_table("An edge between two logical CPUs (best of paired rounds)", rows);
}

}  // namespace

int main(int argc, char** argv) {
  set_logical_cpus(2);  // before anything creates the devices
  bool quick = false, placement_only = false;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    placement_only |= std::strcmp(argv[i], "--placement-only") == 0;
  }
  std::vector<int> sizes = {1000, 10000};
  if (!quick) sizes.push_back(100000);
  std::vector<PlacementDevice> devices;
  for (int i = 0; i < 4; ++i) devices.push_back({local_device_name(DeviceType::CPU, i), DeviceType::CPU});

  std::vector<Row> rows;
  for (int n : sizes) {
    std::mt19937 rng(42);
    GraphIR g = model_graph(n, rng);
    const int repeats = n >= 100000 ? 3 : 5;
    PlacementResult placed;
    const double t_place = seconds_of([&] { placed = place(g, devices); }, repeats);
    // Freeing the partitions of the previous run is left out of the time: it is the caller's
    // cost, whenever it drops them, not the pass's.
    PartitionResult parts;
    double t_partition = 1e30;
    for (int r = 0; r < repeats; ++r) {
      parts = PartitionResult();
      auto t0 = std::chrono::steady_clock::now();
      parts = partition(g);
      t_partition = std::min(t_partition, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // The share of the time the graph copy takes: the same graph on one device.
    GraphIR one = g.clone();
    for (int32_t id : one.node_ids()) one.node(id).assigned_device = devices[0].name;
    PartitionResult whole;
    const double t_copy = seconds_of([&] { whole = partition(one); }, repeats);
    rows.push_back({"partition, " + std::to_string(n) + " nodes, 1 device", time_text(t_copy), "-",
                    fmt("%.2f us/node", t_copy / n * 1e6), "no transfers: the copy"});
    const double per_node = (t_place + t_partition) / n;
    rows.push_back({"place, " + std::to_string(n) + " nodes, 4 devices", time_text(t_place), "-",
                    fmt("%.2f us/node", t_place / n * 1e6), n == 100000 ? "place+partition <= 1 s" : "~n log n"});
    rows.push_back({"partition, " + std::to_string(n) + " nodes", time_text(t_partition), "-",
                    fmt("%.2f us/node", t_partition / n * 1e6), std::to_string(parts.num_sends) + " Send/Recv pairs"});
    rows.push_back({"  place + partition", time_text(t_place + t_partition), "-", fmt("%.2f us/node", per_node * 1e6),
                    fmt("model: %.2fx of 1 device", placed.modelled_seconds / placed.single_device_seconds)});
  }
  weft::bench::print_table("Placement and partitioning (4 devices, best of 3-5)", rows);
  if (placement_only) return 0;
  cross_device_edge_table();

  rows.clear();
  for (int n : sizes) {
    std::mt19937 rng(7);
    const GraphIR original = foldable_graph(n, rng);
    struct Pass {
      const char* name;
      int (*run)(GraphIR&);
    };
    const Pass passes[] = {{"constant_fold", [](GraphIR& g) { return constant_fold(g); }},
                           {"prune", [](GraphIR& g) { return prune(g, {}); }},
                           {"cse", [](GraphIR& g) { return eliminate_common_subexpressions(g); }},
                           {"fuse_elementwise", [](GraphIR& g) { return fuse_elementwise(g); }}};
    // Each pass on the output of the ones before it, as the optimiser runs them.
    GraphIR g = original.clone();
    for (const Pass& p : passes) {
      GraphIR input = g.clone();
      int changed = 0;
      GraphIR out;
      const double t = seconds_of(
          [&] {
            out = input.clone();
            changed = p.run(out);
          },
          n >= 100000 ? 1 : 3);
      g = std::move(out);
      rows.push_back({std::string(p.name) + ", " + std::to_string(n) + " nodes", time_text(t), "-",
                      fmt("%.2f us/node", t / n * 1e6), std::to_string(changed) + " nodes changed"});
    }
  }
  weft::bench::print_table("Optimisation passes (time includes one graph copy)", rows);
  return 0;
}
