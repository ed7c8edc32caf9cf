// Kernels of If and While: they run their subgraphs through the executor's RunContext, which
// builds (once) and caches an executor per subgraph, on the device the If or While runs on. The
// subgraph results become the outputs as they are, without copies. The kernels are host code on
// every device type: on a GPU, the predicate (a bool scalar in device memory) is read back, one
// small download per branch taken or iteration, as TensorFlow's GPU loops read their condition.
// Placement puts an If or While on a GPU only where every node of its subgraphs has a kernel
// there (scheduler/passes/place.cpp).
#include "kernels/register_all.h"
#include "runtime/graph.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

bool truth(KernelContext& ctx, const Tensor& pred, const char* what) {
  if (pred.dtype() != DType::Bool || pred.size() != 1)
    ctx.fail(std::string(what) + " must be a bool scalar, got " + std::string(dtype_name(pred.dtype())) + " " +
             pred.shape().to_string());
  return pred.item<bool>();
}

void if_kernel(KernelContext& ctx) {
  const bool taken = truth(ctx, ctx.input(0), "pred");
  const GraphIR& branch = *ctx.attrs.get<GraphAttr>(taken ? "then_branch" : "else_branch");
  std::vector<Tensor> results = ctx.run_context().call(branch, ctx.inputs.subspan(1), ctx.device);
  if (results.size() != ctx.outputs.size())
    throw Internal("[cond] the branch returned " + std::to_string(results.size()) + " values for " +
                   std::to_string(ctx.outputs.size()) + " outputs");
  for (size_t i = 0; i < results.size(); ++i) ctx.output(static_cast<int>(i)) = std::move(results[i]);
}

void while_kernel(KernelContext& ctx) {
  const GraphIR& cond = *ctx.attrs.get<GraphAttr>("cond");
  const GraphIR& body = *ctx.attrs.get<GraphAttr>("body");
  const size_t n = static_cast<size_t>(ctx.attrs.get<int64_t>("num_loop_vars"));
  const int64_t max_iterations = ctx.attrs.get_or<int64_t>("max_iterations", -1);
  // args: the loop variables, which each iteration replaces, then the loop-invariant captures.
  std::vector<Tensor> args(ctx.inputs.begin(), ctx.inputs.end());
  RunContext& run = ctx.run_context();
  int64_t iterations = 0;
  while (max_iterations < 0 || iterations < max_iterations) {
    std::vector<Tensor> c = run.call(cond, args, ctx.device);
    if (!truth(ctx, c.at(0), "cond's result")) break;
    std::vector<Tensor> next = run.call(body, args, ctx.device);
    if (next.size() != n)
      throw Internal("[while_loop] the body returned " + std::to_string(next.size()) + " values for " +
                     std::to_string(n) + " loop variables");
    for (size_t i = 0; i < n; ++i) args[i] = std::move(next[i]);
    ++iterations;
  }
  for (size_t i = 0; i < n; ++i) ctx.output(static_cast<int>(i)) = std::move(args[i]);
  Tensor count = Tensor::empty(DType::Int64, Shape{}, cpu_device());
  *count.data<int64_t>() = iterations;
  ctx.output(static_cast<int>(n)) = ctx.device.type() == DeviceType::CPU ? std::move(count) : count.to(&ctx.device);
}

}  // namespace

void register_control_flow_kernels() {
  // Selected by output 0's dtype (a branch result or loop variable), so every dtype has them.
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    for (DeviceType device : {DeviceType::CPU, DeviceType::CUDA}) {
      register_kernel("If", device, dt, if_kernel);
      register_kernel("While", device, dt, while_kernel);
    }
  }
}

}  // namespace weft::cpu
