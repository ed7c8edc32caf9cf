// Send and Recv between devices of this process (and, through another Rendezvous, between
// processes): Send hands its input to the step's rendezvous and never waits; Recv is an
// asynchronous kernel that completes when the tensor arrives, holding no thread meanwhile.
// Neither copies: on host devices the receiver gets the sender's buffer.
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/rendezvous.h"

namespace weft::cpu {

namespace {

Rendezvous& step_rendezvous(KernelContext& ctx) {
  Rendezvous* r = ctx.run_context().rendezvous();
  if (!r)
    throw FailedPrecondition("[" + ctx.op.display +
                             "] runs only in a step whose partitions exchange tensors (the run has no rendezvous)");
  return *r;
}

void send(KernelContext& ctx) {
  step_rendezvous(ctx).send(rendezvous_key_of_checked_attrs(ctx.attrs, ctx.run_context().step_id()), ctx.input(0));
}

void recv(KernelContext& ctx, AsyncDone done) {
  Rendezvous& r = step_rendezvous(ctx);
  Tensor* out = &ctx.output(0);
  r.recv_async(rendezvous_key_of_checked_attrs(ctx.attrs, ctx.run_context().step_id()),
               [out, done = std::move(done)](std::exception_ptr error, Tensor value, bool /*is_dead*/) {
                 if (!error) *out = std::move(value);
                 done(std::move(error));
               });
}

}  // namespace

void register_transfer_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    register_kernel("Send", DeviceType::CPU, static_cast<DType>(d), send);
    register_async_kernel("Recv", DeviceType::CPU, static_cast<DType>(d), recv);
  }
}

}  // namespace weft::cpu
