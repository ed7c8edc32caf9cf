// Send and Recv between devices of this process (and, through another Rendezvous, between
// processes): Send hands its input to the step's rendezvous and never waits; Recv is an
// asynchronous kernel that completes when the tensor arrives, holding no thread meanwhile.
//
// Host devices never copy: the receiver gets the sender's buffer. A GPU is the exception that
// moves bytes, always on the receiving side within a process (runtime/device_transfer.h: queued on
// the receiving GPU's copy stream, or a download that completes the Recv when it lands), so a Send
// never waits. Between processes a GPU tensor bound for a GPU goes GPU to GPU through the NCCL
// rendezvous (comm/nccl/nccl_p2p.h) where the rendezvous has it; otherwise the rendezvous moves
// host memory, and a Send on a GPU first downloads its tensor, asynchronously.
//
// These kernels are the same host code on every device type; they are registered for CPU and CUDA
// here, in one place.
#include <optional>

#include "runtime/collectives.h"
#include "kernels/register_all.h"
#include "runtime/device_transfer.h"
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

// Send on a GPU: within the process the tensor is handed over as it is (the Recv copies it where
// it needs it); to another process it goes GPU to GPU where the rendezvous can (NCCL, to a GPU),
// else down to host memory first, without holding a thread.
void send_from_gpu(KernelContext& ctx, AsyncDone done) {
  Rendezvous& r = step_rendezvous(ctx);
  RendezvousKey key = rendezvous_key_of_checked_attrs(ctx.attrs, ctx.run_context().step_id());
  if (task_of_device(key.src_device, ctx.op.display) == task_of_device(key.dst_device, ctx.op.display) ||
      r.takes_device_tensor(key, ctx.input(0))) {
    r.send(key, ctx.input(0));
    done(nullptr);
    return;
  }
  ctx.run_context().async_wait_over(ctx);  // it waits for its own download only
  transfer_async(ctx.input(0), *cpu_device(),
                 [&r, key = std::move(key), done = std::move(done)](std::exception_ptr error, Tensor host) {
                   if (!error) {
                     try {
                       r.send(key, std::move(host));
                     } catch (...) {
                       error = std::current_exception();
                     }
                   }
                   done(error);
                 });
}

// A Recv's bytes where its shape is fully known, for Rendezvous::expect_transfer.
std::optional<uint64_t> static_bytes(const Attrs& attrs) {
  const Shape& shape = attrs.get<Shape>("shape");
  for (int64_t d : shape)
    if (d < 0) return std::nullopt;
  return static_cast<uint64_t>(shape.num_elements()) * dtype_size(attrs.get<DType>("dtype"));
}

RecvExpectation expectation_of(const Attrs& attrs) {
  return RecvExpectation{attrs.get<DType>("dtype"), attrs.get<Shape>("shape")};
}

// A received tensor against what the Recv node declares (its dtype, and its shape where known):
// a peer's tensor is untrusted, and the kernels after the Recv trust the node's declaration.

std::exception_ptr check_received(const Attrs& attrs, const RendezvousKey& key, const Tensor& value) {
  const RecvExpectation expected = expectation_of(attrs);
  if (expected.admits(value.dtype(), value.shape())) return nullptr;
  return std::make_exception_ptr(InvalidArgument("[recv] key " + key.to_string() + " brought " +
                                                 std::string(dtype_name(value.dtype())) + value.shape().to_string() +
                                                 ", where the Recv expects " + expected.to_string()));
}

void recv(KernelContext& ctx, AsyncDone done) {
  Rendezvous& r = step_rendezvous(ctx);
  Tensor* out = &ctx.output(0);
  Device* here = &ctx.device;
  const KernelContext* kernel = &ctx;
  const RendezvousKey key = rendezvous_key_of_checked_attrs(ctx.attrs, ctx.run_context().step_id());
  if (const std::optional<uint64_t> bytes = static_bytes(ctx.attrs)) r.expect_transfer(key, *bytes);
  // A rendezvous from another process checks a tensor's header against this before receiving
  // its bytes; the tensor is checked again here, whichever way it came.
  r.recv_async_expecting(
      key, expectation_of(ctx.attrs),
      [out, here, kernel, key, done = std::move(done)](std::exception_ptr error, Tensor value, bool /*is_dead*/) {
                 if (!error && value.defined()) error = check_received(kernel->attrs, key, value);
                 if (error || !value.defined() || readable_on(here, value)) {
                   if (!error) *out = std::move(value);
                   done(std::move(error));
                   return;
                 }
                 // The tensor is here; the copy onto (or down from) the GPU finishes on its own.
                 kernel->run_context().async_wait_over(*kernel);
                 transfer_async(std::move(value), *here, [out, done](std::exception_ptr e, Tensor moved) {
                   if (!e) *out = std::move(moved);
                   done(std::move(e));
                 });
               });
}

}  // namespace

void register_transfer_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    register_kernel("Send", DeviceType::CPU, dtype, send);
    register_async_kernel("Recv", DeviceType::CPU, dtype, recv);
    register_async_kernel("Send", DeviceType::CUDA, dtype, send_from_gpu);
    register_async_kernel("Recv", DeviceType::CUDA, dtype, recv);
  }
}

}  // namespace weft::cpu
