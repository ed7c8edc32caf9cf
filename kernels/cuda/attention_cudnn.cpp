// cuDNN's fused attention for 16-bit ScaledDotProductAttention and its gradient (see the header
// for when it is taken). One cuDNN graph per problem and pass, built on first use and cached per
// thread, since a graph's plans are built with, and executed on, this thread's handle
// (cudnn_handle.h); the workspace comes from weft's allocator, ordered on the device's stream.
// Without cuDNN's frontend headers at build time (scripts/setup fetches them where the CUDA
// toolkit is), the path is compiled out and weft's kernels compute every case.
#include "kernels/cuda/attention_cudnn.h"

#include <atomic>
#include <mutex>
#include <string>

#include "kernels/attention_params.h"

#if WEFT_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/cudnn_handle.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"
#endif

namespace weft::cuda {

namespace {
std::atomic<int64_t> g_calls{0};
std::mutex g_refusal_mu;
std::string g_refusal;  // guarded by g_refusal_mu
}  // namespace

int64_t cudnn_attention_calls() { return g_calls.load(); }

std::string cudnn_attention_refusal() {
  std::lock_guard<std::mutex> lock(g_refusal_mu);
  return g_refusal;
}

#if !WEFT_HAVE_CUDNN_FRONTEND

bool cudnn_attention_forward(KernelContext&, const AttentionParams&) { return false; }
bool cudnn_attention_backward(KernelContext&, const AttentionParams&) { return false; }

#else

namespace {

namespace fe = cudnn_frontend;
using TensorAttr = std::shared_ptr<fe::graph::Tensor_attributes>;

enum class Pass { kForward, kBackward };

// The graph's tensors, named by uid in the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Key {
  Pass pass;
  int device;
  DType dtype;
  std::array<int64_t, 6> dims;  // batch heads sq sk d dv
  double scale;
  bool causal;
  auto tie() const { return std::tie(pass, device, dtype, dims, scale, causal); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN does not take this problem
  int64_t workspace = 0;
};

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_CUDNN_ATTENTION");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// Whether weft's definition and cuDNN's agree on the problem (the header's first two rules).
bool same_definition(const AttentionParams& g) {
  if (g.mask || g.dropout > 0) return false;
  if (g.batch * g.heads == 0 || g.sq == 0 || g.sk == 0 || g.d == 0 || g.dv == 0) return false;
  return !g.causal || g.sq <= g.sk;
}

// Query blocks of fewer rows than this (a sampler's steps after its key-value cache, one new cache
// length each) stay on weft's kernel: each new shape would cost cuDNN a plan to build, and
// a short block gains little from fusion.
constexpr int64_t kMinQueryRows = 16;

// A contiguous [b, h, s, d] tensor of the graph (lse's [b, h, sq] viewed as [b, h, sq, 1]).
TensorAttr tensor(fe::graph::Graph& graph, const char* name, Uid uid, int64_t b, int64_t h, int64_t s, int64_t d) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({b, h, s, d})
                          .set_stride({h * s * d, s * d, d, 1}));
}

void set_output(const TensorAttr& t, Uid uid, int64_t b, int64_t h, int64_t s, int64_t d) {
  t->set_output(true).set_uid(uid).set_dim({b, h, s, d}).set_stride({h * s * d, s * d, d, 1});
}

// Causal masking with weft's bottom-right diagonal; with Sq = Sk it is also the top-left one,
// which older cuDNN versions support more widely.
template <class Attrs>
void set_causal(Attrs& a, const AttentionParams& g) {
  if (!g.causal) return;
  if (g.sq == g.sk)
    a.set_causal_mask(true);
  else
    a.set_causal_mask_bottom_right(true);
}

std::shared_ptr<fe::graph::Graph> describe(const AttentionParams& g, DType dtype, Pass pass) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(dtype == DType::Float16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = g.batch, h = g.heads;
  TensorAttr q = tensor(*graph, "q", kQ, b, h, g.sq, g.d);
  TensorAttr k = tensor(*graph, "k", kK, b, h, g.sk, g.d);
  TensorAttr v = tensor(*graph, "v", kV, b, h, g.sk, g.dv);
  const float scale = static_cast<float>(g.scale);
  if (pass == Pass::kForward) {
    auto attrs = fe::graph::SDPA_attributes().set_name("weft_attention").set_generate_stats(true).set_attn_scale(scale);
    set_causal(attrs, g);
    auto [o, stats] = graph->sdpa(q, k, v, attrs);
    set_output(o, kO, b, h, g.sq, g.dv);
    set_output(stats, kStats, b, h, g.sq, 1);
    stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    TensorAttr o = tensor(*graph, "o", kO, b, h, g.sq, g.dv);
    TensorAttr dout = tensor(*graph, "dout", kDO, b, h, g.sq, g.dv);
    TensorAttr stats = tensor(*graph, "stats", kStats, b, h, g.sq, 1);
    stats->set_data_type(fe::DataType_t::FLOAT);
    auto attrs = fe::graph::SDPA_backward_attributes()
                     .set_name("weft_attention_grad")
                     .set_attn_scale(scale)
                     .set_deterministic_algorithm(true);
    set_causal(attrs, g);
    auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dout, stats, attrs);
    set_output(dq, kDQ, b, h, g.sq, g.d);
    set_output(dk, kDK, b, h, g.sk, g.d);
    set_output(dv, kDV, b, h, g.sk, g.dv);
  }
  return graph;
}

// The problem's graph with its plan built, or a Plan without graph where cuDNN refuses it at any
// step (validation, heuristics, support, plan building): then weft's kernels compute it.
// The frontend reports most refusals as an error_t and some by throwing; both are kept for
// cudnn_attention_refusal().
Plan build(const AttentionParams& g, DType dtype, Pass pass, cudnnHandle_t handle) {
  Plan plan;
  auto refused = [](const std::string& step, const std::string& why) {
    std::lock_guard<std::mutex> lock(g_refusal_mu);
    g_refusal = step + ": " + why;
  };
  try {
    std::shared_ptr<fe::graph::Graph> graph = describe(g, dtype, pass);
    const std::pair<const char*, std::function<fe::error_t()>> steps[] = {
        {"validate", [&] { return graph->validate(); }},
        {"build_operation_graph", [&] { return graph->build_operation_graph(handle); }},
        {"create_execution_plans", [&] { return graph->create_execution_plans({fe::HeurMode_t::A}); }},
        {"check_support", [&] { return graph->check_support(handle); }},
        {"build_plans", [&] { return graph->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); }},
        {"get_workspace_size", [&] { return graph->get_workspace_size(plan.workspace); }}};
    for (const auto& [step, call] : steps) {
      fe::error_t status = call();
      if (!status.is_good()) {
        refused(step, status.get_message());
        return plan;
      }
    }
    plan.graph = std::move(graph);
  } catch (const std::exception& e) {
    refused("exception", e.what());
  }
  return plan;
}

const Plan& plan_for(const AttentionParams& g, DType dtype, Pass pass, CudaContext& cu,
                     cudnnHandle_t handle) {
  thread_local std::map<Key, Plan> plans;
  const Key key{pass, cu.device, dtype, {g.batch, g.heads, g.sq, g.sk, g.d, g.dv}, g.scale, g.causal};
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  if (plans.size() >= 256) plans.clear();  // bounded: ever new shapes start again
  return plans.emplace(key, build(g, dtype, pass, handle)).first->second;
}

using Pack = std::unordered_map<int64_t, void*>;  // uid -> device pointer

// `pack_of` names the call's tensors; asked for only when cuDNN takes the call.
template <class PackFn>
bool run(KernelContext& ctx, const AttentionParams& g, Pass pass, PackFn pack_of) {
  const DType dtype = ctx.input(pass == Pass::kForward ? 0 : 1).dtype();
  if (!enabled() || (dtype != DType::Float16 && dtype != DType::BFloat16) || !same_definition(g) ||
      g.sq < kMinQueryRows)
    return false;
  CudaContext& cu = cuda_context(ctx);
  cudnnHandle_t handle = dnn_handle(ctx, cu);
  const Plan& plan = plan_for(g, dtype, pass, cu, handle);
  if (!plan.graph) return false;
  const Tensor workspace =
      Tensor::empty(DType::UInt8, Shape{std::max<int64_t>(plan.workspace, 1)}, &ctx.device);
  Pack pack = pack_of();
  fe::error_t status = plan.graph->execute(handle, pack, raw_data(workspace));
  if (!status.is_good())
    throw Internal("[" + ctx.op.display + "] cuDNN's fused attention failed: " + status.get_message());
  g_calls.fetch_add(1);
  return true;
}

}  // namespace

bool cudnn_attention_forward(KernelContext& ctx, const AttentionParams& g) {
  return run(ctx, g, Pass::kForward, [&] {
    return Pack{{kQ, raw_data(ctx.input(0))},
                {kK, raw_data(ctx.input(1))},
                {kV, raw_data(ctx.input(2))},
                {kO, raw_data(ctx.output(0))},
                {kStats, raw_data(ctx.output(1))}};
  });
}

bool cudnn_attention_backward(KernelContext& ctx, const AttentionParams& g) {
  return run(ctx, g, Pass::kBackward, [&] {
    return Pack{{kDO, raw_data(ctx.input(0))},
                {kQ, raw_data(ctx.input(1))},
                {kK, raw_data(ctx.input(2))},
                {kV, raw_data(ctx.input(3))},
                {kO, raw_data(ctx.input(4))},
                {kStats, raw_data(ctx.input(5))},
                {kDQ, raw_data(ctx.output(0))},
                {kDK, raw_data(ctx.output(1))},
                {kDV, raw_data(ctx.output(2))}};
  });
}

#endif  // WEFT_HAVE_CUDNN_FRONTEND

}  // namespace weft::cuda
