// Placement: the hard rules (requests, kernels, colocation), soft placement, and the cost model's
// list scheduler, on graphs built node by node.
#include "scheduler/passes/place.h"

#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <set>

#include "api/ops/creation.h"
#include "graph_test_util.h"
#include "comm/nccl/nccl_id.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "random_dag_util.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const std::string kCpu0 = local_device_name(DeviceType::CPU, 0);
const std::string kCpu1 = local_device_name(DeviceType::CPU, 1);
const std::string kCpu2 = local_device_name(DeviceType::CPU, 2);
const std::string kCpu3 = local_device_name(DeviceType::CPU, 3);
const std::string kGpu0 = local_device_name(DeviceType::CUDA, 0);

std::vector<PlacementDevice> cpus(int n) {
  std::vector<PlacementDevice> d;
  for (int i = 0; i < n; ++i) d.push_back({local_device_name(DeviceType::CPU, i), DeviceType::CPU});
  return d;
}

std::vector<PlacementDevice> cpu_and_gpu() {
  return {{kCpu0, DeviceType::CPU}, {kGpu0, DeviceType::CUDA, 1e13, 1e12}};
}

// Test ops whose kernels exist on one device type only, whatever this build has; an optional
// `var` attribute puts them in a variable's colocation group.
void register_test_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_ops();
    auto infer = [](InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); };
    auto kernel = [](KernelContext&) {};
    for (const char* name : {"PlaceTestCpuOnly", "PlaceTestGpuOnly", "PlaceTestBoth"})
      op_registry().add({.name = name, .display = name, .min_inputs = 1, .max_inputs = 1,
                         .attrs = {{"var", AttrType::String, false}}, .infer = infer});
    register_kernel("PlaceTestCpuOnly", DeviceType::CPU, float32, kernel);
    register_kernel("PlaceTestGpuOnly", DeviceType::CUDA, float32, kernel);
    register_kernel("PlaceTestBoth", DeviceType::CPU, float32, kernel);
    register_kernel("PlaceTestBoth", DeviceType::CUDA, float32, kernel);
  });
}

class Place : public ::testing::Test {
 protected:
  void SetUp() override { register_test_ops(); }
};

TEST_F(Place, EveryNodeGetsADeviceAndRequestsAreHonoured) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");
  int32_t b = add(g, "Relu", {{a, 0}}, {}, "b");
  g.node(a).requested_device = "/cpu:2";
  g.node(b).requested_device = "/job:localhost/replica:0/task:0/device:CPU:3";
  PlacementResult r = place(g, cpus(4));
  EXPECT_TRUE(r.notices.empty());
  for (int32_t id : g.node_ids()) EXPECT_FALSE(g.node(id).assigned_device.empty());
  EXPECT_EQ(g.node(a).assigned_device, kCpu2);
  EXPECT_EQ(g.node(b).assigned_device, kCpu3);
}

TEST_F(Place, PartialNamesMatchEveryDeviceTheyName) {
  // Two tasks of two CPUs each, and a GPU on task 1.
  std::vector<PlacementDevice> devices;
  for (int task = 0; task < 2; ++task)
    for (int i = 0; i < 2; ++i)
      devices.push_back({"/job:worker/replica:0/task:" + std::to_string(task) + "/device:CPU:" + std::to_string(i),
                         DeviceType::CPU});
  devices.push_back({"/job:worker/replica:0/task:1/device:GPU:0", DeviceType::CUDA});
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"/cpu:1", {"/job:worker/replica:0/task:0/device:CPU:1", "/job:worker/replica:0/task:1/device:CPU:1"}},
      {"/job:worker/task:1",
       {"/job:worker/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:1",
        "/job:worker/replica:0/task:1/device:GPU:0"}},
      {"/device:CPU:*",
       {devices[0].name, devices[1].name, devices[2].name, devices[3].name}},
      {"/gpu:0", {"/job:worker/replica:0/task:1/device:GPU:0"}},
      {"/task:0/cpu:0", {"/job:worker/replica:0/task:0/device:CPU:0"}},
  };
  std::vector<int32_t> ids;
  for (const auto& [request, allowed] : cases) {
    ids.push_back(add(g, "PlaceTestBoth", {{x, 0}}));
    g.node(ids.back()).requested_device = request;
  }
  PlacementResult r = place(g, devices);
  EXPECT_TRUE(r.notices.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& got = g.node(ids[i]).assigned_device;
    const auto& allowed = cases[i].second;
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), got), allowed.end()) << cases[i].first << " -> " << got;
  }
}

TEST_F(Place, AnInvalidRequestNamesTheNodeAndItsLine) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "negate");
  g.node(a).requested_device = "/cpu:one";
  const std::string msg = error_of([&] { place(g, cpus(2)); });
  EXPECT_TRUE(contains(msg, "[place]")) << msg;
  EXPECT_TRUE(contains(msg, "node 'negate'")) << msg;
  EXPECT_TRUE(contains(msg, "graph_test.cpp:1")) << msg;
  EXPECT_TRUE(contains(msg, "/cpu:one")) << msg;
}

TEST_F(Place, ARequestForAnAbsentDeviceIsSoftPlacedWithOneNotice) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");
  g.node(a).requested_device = "/cpu:7";
  PlacementResult r = place(g, cpus(4));
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_TRUE(contains(r.notices[0], "node 'a'")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], "/cpu:7")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], "names no device")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], g.node(a).assigned_device)) << r.notices[0];
  // The rest of the request holds: a CPU.
  EXPECT_TRUE(contains(g.node(a).assigned_device, "device:CPU:"));

  PlacementOptions strict;
  strict.allow_soft_placement = false;
  EXPECT_TRUE(contains(error_of([&] { place(g, cpus(4), strict); }), "soft placement is off"));
}

TEST_F(Place, ARequestedDeviceWithoutAKernelMovesToOneWithIt) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "PlaceTestCpuOnly", {{x, 0}}, {}, "cpu_only");
  int32_t b = add(g, "PlaceTestGpuOnly", {{a, 0}}, {}, "gpu_only");
  g.node(a).requested_device = "/gpu:0";
  PlacementResult r = place(g, cpu_and_gpu());
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_TRUE(contains(r.notices[0], "node 'cpu_only'")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], "no kernel for PlaceTestCpuOnly (float32)")) << r.notices[0];
  EXPECT_EQ(g.node(a).assigned_device, kCpu0);
  // Kernel availability alone sends the other op to the GPU.
  EXPECT_EQ(g.node(b).assigned_device, kGpu0);
}

TEST_F(Place, AnOpWithoutAKernelAnywhereIsAnError) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  add(g, "PlaceTestGpuOnly", {{x, 0}}, {}, "needs_gpu");
  const std::string msg = error_of([&] { place(g, cpus(2)); });
  EXPECT_TRUE(contains(msg, "[place] no kernel for op PlaceTestGpuOnly (float32) on any device: tried CPU")) << msg;
  EXPECT_TRUE(contains(msg, "node 'needs_gpu'")) << msg;
}

// A Placeholder is fed host memory, so it sits on a CPU even when everything reading it runs on a
// GPU; a view has no kernel to need, so it stays with its GPU neighbours.
TEST_F(Place, PlaceholdersSitOnACpuAndViewsRunAnywhere) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "PlaceTestGpuOnly", {{x, 0}}, {}, "a");
  int32_t r = add(g, "Reshape", {{a, 0}}, {{"shape", Shape{2, 2}}}, "r");
  int32_t y = add(g, "PlaceTestGpuOnly", {{r, 0}}, {}, "y");
  g.results = {{y, 0}};
  std::vector<PlacementDevice> cpu_and_gpu = {{kCpu0, DeviceType::CPU}, {kGpu0, DeviceType::CUDA, 1e13, 1e12}};
  place(g, cpu_and_gpu);
  EXPECT_EQ(g.node(x).assigned_device, kCpu0);
  for (int32_t id : {a, r, y}) EXPECT_EQ(g.node(id).assigned_device, kGpu0) << g.node(id).name;
  std::vector<PlacementDevice> gpu_only = {{kGpu0, DeviceType::CUDA}};
  const std::string msg = error_of([&] { place(g, gpu_only); });
  EXPECT_TRUE(contains(msg, "Placeholder")) << msg;
}

// A placeholder asked onto a GPU (an argument of a function traced under the GPU's scope) sits
// on a CPU without a notice, with soft placement off too; a GPU-only op asking for a GPU that is
// not there is still moved with a notice.
TEST_F(Place, APlaceholderAskedOntoAGpuSitsOnACpuQuietly) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  g.node(x).requested_device = kGpu0;
  int32_t a = add(g, "PlaceTestBoth", {{x, 0}}, {}, "a");
  g.node(a).requested_device = kGpu0;
  g.results = {{a, 0}};
  std::vector<PlacementDevice> cpu_and_gpu = {{kCpu0, DeviceType::CPU}, {kGpu0, DeviceType::CUDA, 1e13, 1e12}};
  for (bool soft : {true, false}) {
    const PlacementResult r = place(g, cpu_and_gpu, {.allow_soft_placement = soft});
    EXPECT_TRUE(r.notices.empty()) << r.notices.front();
    EXPECT_EQ(g.node(x).assigned_device, kCpu0);
    EXPECT_EQ(g.node(a).assigned_device, kGpu0);
  }
}

// v's reads, assignment and in-place update, one read asking for /cpu:2.
struct VariableGraph {
  GraphIR g;
  int32_t read, assign, for_update, apply, other;
};

VariableGraph variable_graph() {
  VariableGraph v;
  GraphIR& g = v.g;
  auto state = std::make_shared<VariableState>();
  state->dtype = float32;
  state->shape = Shape{4};
  state->name = "v";
  g.variables["v"] = state;
  const Attrs var{{"var", std::string("v")}, {"dtype", float32}, {"shape", Shape{4}}};
  int32_t x = placeholder(g, float32, {4}, "x");
  v.read = add(g, "ReadVariable", {}, var, "read");
  v.other = add(g, "Mul", {{v.read, 0}, {x, 0}}, {}, "use_of_read");
  v.assign = add(g, "AssignAddVariable", {{v.other, 0}}, var, "assign");
  v.for_update = add(g, "ReadVariableForUpdate", {}, var, "for_update");
  v.apply = add(g, "ApplyGradientDescent", {{v.for_update, 0}, {x, 0}}, {{"lr", 0.1}}, "apply");
  return v;
}

TEST_F(Place, AVariableStaysWithEveryOpThatReadsOrUpdatesIt) {
  VariableGraph v = variable_graph();
  v.g.node(v.read).requested_device = "/cpu:2";
  place(v.g, cpus(4));
  for (int32_t id : {v.read, v.assign, v.for_update, v.apply}) EXPECT_EQ(v.g.node(id).assigned_device, kCpu2) << v.g.node(id).name;
}

TEST_F(Place, ConflictingRequestsInsideAColocationGroupFollowTheFirstWithANotice) {
  VariableGraph v = variable_graph();
  v.g.node(v.read).requested_device = "/cpu:1";
  v.g.node(v.apply).requested_device = "/cpu:2";
  const PlacementResult r = place(v.g, cpus(4));
  for (int32_t id : {v.read, v.assign, v.for_update, v.apply}) EXPECT_EQ(v.g.node(id).assigned_device, kCpu1) << v.g.node(id).name;
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_TRUE(contains(r.notices[0], "node 'apply'")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], "must share a device with node 'read'")) << r.notices[0];
  EXPECT_TRUE(contains(r.notices[0], "placed on " + kCpu1)) << r.notices[0];
}

TEST_F(Place, ConflictingRequestsInsideAColocationGroupNameBothNodesWithoutSoftPlacement) {
  VariableGraph v = variable_graph();
  v.g.node(v.read).requested_device = "/cpu:1";
  v.g.node(v.apply).requested_device = "/cpu:2";
  const std::string msg = error_of([&] { place(v.g, cpus(4), {.allow_soft_placement = false}); });
  EXPECT_TRUE(contains(msg, "node 'read'")) << msg;
  EXPECT_TRUE(contains(msg, "'/cpu:1'")) << msg;
  EXPECT_TRUE(contains(msg, "node 'apply'")) << msg;
  EXPECT_TRUE(contains(msg, "'/cpu:2'")) << msg;
  // Requests that agree (one more precise than the other) are no conflict.
  v.g.node(v.apply).requested_device = "/device:CPU:*";
  place(v.g, cpus(4), {.allow_soft_placement = false});
  EXPECT_EQ(v.g.node(v.apply).assigned_device, kCpu1);
}

TEST_F(Place, ColocatedOpsWithNoCommonDeviceTypeAreAnError) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  add(g, "PlaceTestCpuOnly", {{x, 0}}, {{"var", std::string("v")}}, "on_cpu");
  add(g, "PlaceTestGpuOnly", {{x, 0}}, {{"var", std::string("v")}}, "on_gpu");
  const std::string msg = error_of([&] { place(g, cpu_and_gpu()); });
  EXPECT_TRUE(contains(msg, "no device type in common")) << msg;
  EXPECT_TRUE(contains(msg, "node 'on_cpu'")) << msg;
  EXPECT_TRUE(contains(msg, "node 'on_gpu'")) << msg;
}

TEST_F(Place, AControlFlowOpStaysWithTheVariablesItsBodyUses) {
  auto state = std::make_shared<VariableState>();
  state->dtype = float32;
  state->shape = Shape{};
  auto branch = [&](bool reads) {
    auto b = std::make_shared<GraphIR>();
    int32_t arg = placeholder(*b, float32, {}, "arg");
    b->args = {arg};
    if (reads) {
      b->variables["w_in_branch"] = state;
      int32_t r = add(*b, "ReadVariable", {}, {{"var", std::string("w_in_branch")}, {"dtype", float32}, {"shape", Shape{}}});
      b->results = {{add(*b, "Add", {{arg, 0}, {r, 0}}), 0}};
    } else {
      b->results = {{add(*b, "Neg", {{arg, 0}}), 0}};
    }
    return b;
  };
  GraphIR g;
  g.variables["w"] = state;
  int32_t p = placeholder(g, bool_, {}, "p");
  int32_t x = placeholder(g, float32, {}, "x");
  int32_t read = add(g, "ReadVariable", {}, {{"var", std::string("w")}, {"dtype", float32}, {"shape", Shape{}}}, "read_w");
  int32_t cond = add(g, "If", {{p, 0}, {x, 0}},
                     {{"then_branch", GraphAttr(branch(true))}, {"else_branch", GraphAttr(branch(false))}}, "cond");
  int32_t sum = add(g, "Add", {{cond, 0}, {read, 0}});
  g.results = {{sum, 0}};
  g.node(read).requested_device = "/cpu:3";
  place(g, cpus(4));
  EXPECT_EQ(g.node(cond).assigned_device, kCpu3);
}

// An If runs its branches where it runs: asked onto a GPU, it goes there when every node of its
// branches has a GPU kernel, and stays on a CPU (with a notice) when one has not.
TEST_F(Place, AnIfGoesToAGpuOnlyWhenItsBranchesCan) {
  for (const char* inner : {"PlaceTestBoth", "PlaceTestCpuOnly"}) {
    auto branch = [&] {
      auto b = std::make_shared<GraphIR>();
      int32_t arg = placeholder(*b, float32, {4}, "arg");
      b->args = {arg};
      b->results = {{add(*b, inner, {{arg, 0}}), 0}};
      return b;
    };
    GraphIR g;
    int32_t p = placeholder(g, bool_, {}, "p");
    int32_t x = placeholder(g, float32, {4}, "x");
    int32_t cond = add(g, "If", {{p, 0}, {x, 0}}, {{"then_branch", GraphAttr(branch())}, {"else_branch", GraphAttr(branch())}},
                       "cond");
    g.node(cond).requested_device = kGpu0;
    g.results = {{cond, 0}};
    std::vector<PlacementDevice> cpu_and_gpu = {{kCpu0, DeviceType::CPU}, {kGpu0, DeviceType::CUDA, 1e13, 1e12}};
    const PlacementResult r = place(g, cpu_and_gpu);
    const bool gpu_can = std::string(inner) == "PlaceTestBoth";
    EXPECT_EQ(g.node(cond).assigned_device, gpu_can ? kGpu0 : kCpu0) << inner;
    EXPECT_EQ(r.notices.size(), gpu_can ? 0u : 1u) << inner;
  }
}

// Two independent heavy branches of matmuls from one input, joined at the end.
GraphIR two_branches(int64_t size, int depth) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {size, size}, "x");
  g.args = {x};
  int32_t ends[2];
  for (int b = 0; b < 2; ++b) {
    int32_t h = x;
    for (int i = 0; i < depth; ++i) h = add(g, "MatMul", {{h, 0}, {x, 0}}, {}, "b" + std::to_string(b) + "_" + std::to_string(i));
    ends[b] = h;
  }
  g.results = {{add(g, "Add", {{ends[0], 0}, {ends[1], 0}}, {}, "join"), 0}};
  return g;
}

TEST_F(Place, IndependentHeavyBranchesGoToTwoDevices) {
  GraphIR g = two_branches(512, 4);
  PlacementResult r = place(g, cpus(2));
  const std::string d0 = g.find("b0_0")->assigned_device;
  const std::string d1 = g.find("b1_0")->assigned_device;
  EXPECT_NE(d0, d1);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(g.find("b0_" + std::to_string(i))->assigned_device, d0);
    EXPECT_EQ(g.find("b1_" + std::to_string(i))->assigned_device, d1);
  }
  EXPECT_FALSE(r.used_single_device);
  EXPECT_LT(r.modelled_seconds, r.single_device_seconds * 0.75);
}

TEST_F(Place, AChainStaysOnOneDevice) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {256, 256}, "x");
  int32_t h = x;
  for (int i = 0; i < 10; ++i) h = add(g, "MatMul", {{h, 0}, {x, 0}});
  g.results = {{h, 0}};
  PlacementResult r = place(g, cpus(4));
  std::set<std::string> used;
  for (int32_t id : g.node_ids())
    if (g.node(id).type() == "MatMul") used.insert(g.node(id).assigned_device);
  EXPECT_EQ(used.size(), 1u);
  EXPECT_LE(r.modelled_seconds, r.single_device_seconds);
}

TEST_F(Place, WorkGoesToTheFastestDevice) {
  GraphIR g = two_branches(256, 3);
  std::vector<PlacementDevice> devices = cpus(2);
  devices[0].flops_per_second = 1e9;  // 1000x slower: nothing worth sending there
  devices[1].flops_per_second = 1e12;
  place(g, devices);
  for (int32_t id : g.node_ids())
    if (g.node(id).type() == "MatMul") {
      EXPECT_EQ(g.node(id).assigned_device, kCpu1) << g.node(id).name;
    }
}

TEST_F(Place, NeverSlowerByTheModelThanOneDevice) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    GraphIR g = testing::random_dag(rng, 60, /*control_edges=*/true);
    std::vector<PlacementDevice> devices = cpus(1 + trial % 4);
    for (PlacementDevice& d : devices) d.flops_per_second = 1e9 * (1 + static_cast<double>(rng() % 100));
    // Slow links make splitting costly: the single-device fallback must win then.
    PlacementOptions options;
    if (trial % 2) options.links.same_task_host = {1e-3, 1e6};
    PlacementResult r = place(g, devices, options);
    EXPECT_LE(r.modelled_seconds, r.single_device_seconds) << "trial " << trial;
    EXPECT_LE(r.modelled_seconds, r.list_schedule_seconds) << "trial " << trial;
  }
}

TEST_F(Place, BadDeviceListsAreRejected) {
  GraphIR g;
  placeholder(g, float32, {4}, "x");
  EXPECT_TRUE(contains(error_of([&] { place(g, {}); }), "no candidate devices"));
  std::vector<PlacementDevice> partial = {{"/cpu:0", DeviceType::CPU}};
  partial[0].name = "/job:localhost";
  EXPECT_TRUE(contains(error_of([&] { place(g, partial); }), "not a full device name"));
  std::vector<PlacementDevice> twice = {{kCpu0, DeviceType::CPU}, {kCpu0, DeviceType::CPU}};
  EXPECT_TRUE(contains(error_of([&] { place(g, twice); }), "listed twice"));
}

TEST_F(Place, SummaryAndPictureShowTheDevices) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");
  g.node(a).requested_device = "/cpu:1";
  g.node(x).requested_device = "/cpu:0";
  place(g, cpus(2));
  EXPECT_EQ(placement_summary(g), "x (Placeholder) -> " + kCpu0 + "\na (Neg) -> " + kCpu1 + "\n");
  const std::string dot = g.to_dot();
  EXPECT_TRUE(contains(dot, "fillcolor=\"#cfe2f3\"")) << dot;
  EXPECT_TRUE(contains(dot, "fillcolor=\"#d9ead3\"")) << dot;
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// A collective runs on a GPU only through NCCL (kernels/collective_attrs.h): without an nccl_id
// a request for the GPU relaxes to the CPU (a notice says so); with one it runs where requested,
// in a build with CUDA (and so with the collective's CUDA kernel).
TEST_F(Place, ACollectiveWithoutAnNcclIdNeverGoesToAGpu) {
  GraphIR g;
  int32_t x = placeholder(g, float32, {4}, "x");
  const Attrs group{{"group_key", int64_t{1}}, {"group_members", kGpu0}, {"member", int64_t{0}},
                    {"instance_key", int64_t{0}}, {"group_instances", int64_t{1}}, {"reduction", std::string("sum")}};
  int32_t host = add(g, "CollectiveAllReduce", {{x, 0}}, group, "host");
  g.node(host).requested_device = "/gpu:0";
  g.results = {{host, 0}};
  PlacementResult r = place(g, cpu_and_gpu());
  EXPECT_EQ(g.node(host).assigned_device, kCpu0);
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_TRUE(contains(r.notices[0], "node 'host'")) << r.notices[0];
  if (!nccl_compiled_in()) return;  // an nccl_id is refused without CUDA (tests/comm/nccl_host_test.cpp)
  GraphIR h;
  x = placeholder(h, float32, {4}, "x");
  Attrs with_id = group;
  with_id.set("nccl_id", std::string(256, 'a'));
  int32_t nccl = add(h, "CollectiveAllReduce", {{x, 0}}, with_id, "nccl");
  h.node(nccl).requested_device = "/gpu:0";
  h.results = {{nccl, 0}};
  r = place(h, cpu_and_gpu());
  EXPECT_EQ(h.node(nccl).assigned_device, kGpu0);
  EXPECT_TRUE(r.notices.empty());
}

}  // namespace
}  // namespace weft
