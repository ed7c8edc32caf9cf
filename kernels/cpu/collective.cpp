// The collective ops' kernels (kernels/defs/collective.cpp): asynchronous, they hand their inputs
// to the collectives of their run context (runtime/collectives.h; comm/ implements them) and
// complete through its callback, holding no thread while the other members come. The step id and
// the step's cancellation come from the same run context (eagerly: step 0, nothing cancels).
#include "kernels/collective_attrs.h"
#include "kernels/register_all.h"
#include "runtime/error.h"
#include "runtime/run_context.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

void run_collective(KernelContext& ctx, AsyncDone done, CollectiveKind kind) {
  const CollectiveParams p = collective_params(kind, ctx.op.display, ctx.attrs, static_cast<int>(ctx.inputs.size()));
  Collectives* collectives = ctx.run ? ctx.run->collectives() : nullptr;
  if (!collectives)
    throw FailedPrecondition("[" + ctx.op.display + "] runs where the run gives no collectives (a step or an eager "
                             "call of weft's api gives them)");
  const int64_t step = ctx.run ? ctx.run->step_id() : 0;
  CancellationManager* cancellation = ctx.run ? ctx.run->cancellation() : nullptr;
  std::vector<Tensor> inputs(ctx.inputs.begin(), ctx.inputs.end());  // owned: MPI may read them after the step
  std::span<Tensor> outs = ctx.outputs;
  const std::string display = ctx.op.display;
  collectives->run_async(
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
