// The collective ops' kernels (kernels/defs/collective.cpp): asynchronous, they hand their inputs
// to the process's collective executor (comm/collective_executor.h) and complete through its
// callback, holding no thread while the other members come. The step id and the step's
// cancellation come from the executor's run context; eagerly (no context) the step is 0 and
// nothing cancels.
#include "kernels/collective_attrs.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

void run_collective(KernelContext& ctx, AsyncDone done, CollectiveKind kind) {
  const CollectiveParams p = collective_params(kind, ctx.op.display, ctx.attrs, static_cast<int>(ctx.inputs.size()));
  const int64_t step = ctx.run ? ctx.run->step_id() : 0;
  CancellationManager* cancellation = ctx.run ? ctx.run->cancellation() : nullptr;
  std::vector<Tensor> inputs(ctx.inputs.begin(), ctx.inputs.end());  // owned: MPI may read them after the step
  std::span<Tensor> outs = ctx.outputs;
  const std::string display = ctx.op.display;
  process_collectives().run_async(
      p, step, std::move(inputs), cancellation,
      [outs, display, done = std::move(done)](std::exception_ptr error, std::vector<Tensor> results) {
        if (!error && results.size() != outs.size())
          error = std::make_exception_ptr(Internal("[" + display + "] got " + std::to_string(results.size()) +
                                                   " results for " + std::to_string(outs.size()) + " outputs"));
        if (!error)
          for (size_t i = 0; i < outs.size(); ++i) outs[i] = std::move(results[i]);
        done(std::move(error));
      });
}

void all_reduce(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kAllReduce); }
void broadcast(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kBroadcast); }
void all_gather(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kAllGather); }

}  // namespace

void register_collective_kernels() {
  for (DType d : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    register_async_kernel("CollectiveAllReduce", DeviceType::CPU, d, all_reduce);
    register_async_kernel("CollectiveBroadcast", DeviceType::CPU, d, broadcast);
    register_async_kernel("CollectiveAllGather", DeviceType::CPU, d, all_gather);
  }
}

}  // namespace weft::cpu
