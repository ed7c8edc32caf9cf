// The collective ops' CUDA kernels (kernels/defs/collective.cpp): asynchronous, they hand GPU
// tensors to their run context's collectives (runtime/collectives.h), which run them through NCCL
// (comm/nccl/nccl_collectives.h) and complete when the watchdog sees the collective done, holding
// no thread meanwhile.
//
// Only for a node with an nccl_id: the member index is the NCCL rank, and a task may hold several
// members (one per GPU; their nodes are gathered and issued together, nccl_gathered_launch.h).
// Placement never puts a collective WITHOUT nccl_id on a GPU (scheduler/passes/place.cpp takes
// CUDA out of such a node's kernel types), so these errors meet only an eager call under a GPU
// DeviceScope or a hand-made graph placed strictly.
//
// Tests: tests/gpu/nccl_test.cpp and the data-parallel tests under mpirun. What of this has run on
// a GPU: docs/hardware.md.
#include "kernels/collective_attrs.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/run_context.h"

namespace weft::cuda {

namespace {

// InvalidArgument when the node cannot run through NCCL.
void check_runs_on_nccl(const CollectiveParams& p) {
  if (p.nccl_id.empty())
    throw InvalidArgument("[" + p.op + "] runs on a GPU only through NCCL, and this node has no nccl_id attribute "
                          "(DataParallel gives one to groups of GPUs); place it on its task's CPU to run it through "
                          "MPI");
}

void run_collective(KernelContext& ctx, AsyncDone done, CollectiveKind kind) {
  std::vector<Tensor> outputs;
  try {
    const CollectiveParams p = collective_params(kind, ctx.op.display, ctx.attrs, static_cast<int>(ctx.inputs.size()));
    check_runs_on_nccl(p);
    CudaContext& cu = cuda_context(ctx);
    const auto nranks = static_cast<int64_t>(p.members.size());
    std::vector<Tensor> inputs(ctx.inputs.begin(), ctx.inputs.end());
    switch (kind) {
      case CollectiveKind::kAllReduce:
        for (const Tensor& x : inputs) outputs.push_back(Tensor::empty(x.dtype(), x.shape(), &ctx.device));
        break;
      case CollectiveKind::kBroadcast:
        if (p.member == p.root) outputs.push_back(Tensor::empty(inputs[0].dtype(), inputs[0].shape(), &ctx.device));
        else outputs.push_back(Tensor::empty(p.dtype, p.shape, &ctx.device));
        break;
      case CollectiveKind::kAllGather: {
        const Shape& in = inputs[0].shape();
        if (in.rank() < 1) throw InvalidArgument("[" + p.op + "] needs an input of rank >= 1, got shape " + in.to_string());
        std::vector<int64_t> dims = in.to_vector();
        dims[0] *= nranks;  // every member's input has this shape (ncclAllGather has one count)
        outputs.push_back(Tensor::empty(inputs[0].dtype(), Shape(dims), &ctx.device));
        break;
      }
    }
    Collectives* collectives = ctx.run ? ctx.run->collectives() : nullptr;
    if (!collectives)
      throw FailedPrecondition("[" + p.op + "] runs where the run gives no collectives (a step or an eager call of "
                               "weft's api gives them)");
    DeviceCollectiveCall call{.p = p,
                              .step_id = ctx.run->step_id(),
                              .cancellation = ctx.run->cancellation(),
                              .device = cu.device,
                              .stream = cu.stream,
                              .inputs = std::move(inputs),
                              .outputs = outputs};
    std::span<Tensor> outs = ctx.outputs;
    collectives->run_on_device_async(
        std::move(call), [outs, outputs, done](std::exception_ptr error) {
          if (!error)
            for (size_t i = 0; i < outs.size() && i < outputs.size(); ++i) outs[i] = outputs[i];
          done(error);
        });
  } catch (...) {
    done(std::current_exception());
  }
}

void all_reduce(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kAllReduce); }
void broadcast(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kBroadcast); }
void all_gather(KernelContext& ctx, AsyncDone done) { run_collective(ctx, std::move(done), CollectiveKind::kAllGather); }

}  // namespace

void register_collective_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    if (!nccl_dtype_supported(dtype)) continue;
    register_async_kernel("CollectiveAllReduce", DeviceType::CUDA, dtype, all_reduce);
    register_async_kernel("CollectiveBroadcast", DeviceType::CUDA, dtype, broadcast);
    register_async_kernel("CollectiveAllGather", DeviceType::CUDA, dtype, all_gather);
  }
}

}  // namespace weft::cuda
