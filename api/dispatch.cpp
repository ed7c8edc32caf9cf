#include "api/dispatch.h"

#include <array>
#include <future>
#include <mutex>

#include "api/context.h"
#include "api/eager_fusion.h"
#include "comm/step_collectives.h"
#include "kernels/collective_attrs.h"
#include "kernels/register_all.h"
#include "runtime/device_transfer.h"
#include "runtime/graph.h"
#include "runtime/kernel_registry.h"
#include "runtime/run_context.h"

namespace weft {

const OpDef& op_def(std::string_view name) {
  register_builtin_ops();
  return op_registry().get(name);
}

namespace {

std::string describe_inputs(std::span<const Tensor> inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ", ";
    s += std::string(dtype_name(inputs[i].dtype())) + inputs[i].shape().to_string();
  }
  return s;
}

void check_inputs(const OpDef& op, std::span<const Tensor> inputs) {
  int n = static_cast<int>(inputs.size());
  if (n < op.min_inputs || (op.max_inputs >= 0 && n > op.max_inputs)) {
    std::string want = op.min_inputs == op.max_inputs ? std::to_string(op.min_inputs)
                       : op.max_inputs < 0 ? "at least " + std::to_string(op.min_inputs)
                                           : std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs);
    throw InvalidArgument("[" + op.display + "] takes " + want + " inputs, got " + std::to_string(n));
  }
  for (int i = 0; i < n; ++i)
    if (!inputs[i].defined())
      throw InvalidArgument("[" + op.display + "] input " + std::to_string(i) +
                            " is an empty Tensor handle (default-constructed or moved from)");
}

// Eager placement: the innermost DeviceScope, else the device of the first input, else the CPU.
// A GPU lacking a kernel for this op and dtype falls back to the CPU (views need no kernel: a
// reshape of a GPU tensor stays on the GPU).
// A collective without an NCCL id runs on the CPU too (kernels/collective_attrs.h).
Device* choose_device(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, DType kernel_dtype) {
  Device* dev = eager_context().scoped_device;
  if (!dev) dev = inputs.empty() ? cpu_device() : inputs[0].device_ptr();
  if (dev->type() != DeviceType::CPU && !has_kernel(op, dev->type(), kernel_dtype) && !op.has(kForwardsInput))
    dev = cpu_device();
  if (dev->type() == DeviceType::CUDA && collective_needs_host(op, attrs)) dev = cpu_device();
  return dev;
}

// Inputs living in another device's memory are copied to the kernel's device. Never the host
// memory of logical CPUs: an optimizer's in-place update must reach the variable's own buffer.
std::span<const Tensor> inputs_on(Device* dev, std::span<const Tensor> inputs, std::vector<Tensor>& moved) {
  bool all_here = true;
  for (const Tensor& t : inputs) all_here &= readable_on(dev, t);
  if (all_here) return inputs;
  moved.clear();
  for (const Tensor& t : inputs) moved.push_back(readable_on(dev, t) ? t : t.to(dev));
  return moved;
}

// The run context of an asynchronous kernel called eagerly: the process's collectives, and nothing
// of a step (a Recv fails at once: it has no rendezvous).
class EagerRunContext final : public RunContext {
 public:
  VariableState& variable(std::string_view name) override {
    throw FailedPrecondition("[eager] no graph variable '" + std::string(name) + "' outside a graph");
  }
  std::vector<Tensor> call(const GraphIR&, std::span<const Tensor>, Device&) override {
    throw FailedPrecondition("[eager] no function body runs outside a graph");
  }
  Collectives* collectives() const override { return &process_step_collectives(); }
};

template <class Outputs>
void run_eager(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, InferContext& ic, Outputs& outs) {
  const DType kernel_dtype = kernel_dtype_of(
      op, static_cast<int>(inputs.size()), [&](int i) { return inputs[static_cast<size_t>(i)].dtype(); },
      ic.output(0).dtype);
  Device* dev = choose_device(op, inputs, attrs, kernel_dtype);
  const KernelRef kernel = find_kernels(op, dev->type(), kernel_dtype);
  if (!kernel.found() && !op.has(kForwardsInput))
    throw_no_kernel(op, dev->type(), kernel_dtype, "inputs: " + describe_inputs(inputs));
  std::vector<Tensor> moved;
  std::span<const Tensor> ins = inputs_on(dev, inputs, moved);
  if (kernel.sync) {
    if (Tensor pending = defer_elementwise(op, ins, ic, *dev); pending.defined()) {
      outs[0] = std::move(pending);
      return;
    }
  }
  if (kernel.async) {
    // The synchronous face of an asynchronous kernel (a collective called eagerly): start it and
    // wait for its callback. Kernels that need a step (Recv) throw at once: the run has no rendezvous.
    std::span<Tensor> out_span(outs.data(), static_cast<size_t>(ic.num_outputs()));
    settle_before_kernel_if_any(ins);
    allocate_outputs(op, [&](size_t i) -> const TensorMeta& { return ic.output(static_cast<int>(i)); }, ins, out_span,
                     *dev);
    static EagerRunContext eager_run;
    KernelContext kc{op, ins, out_span, attrs, *dev, &eager_run};
    std::promise<std::exception_ptr> finished;
    auto result = finished.get_future();
    {
      KernelRunning running;
      kernel.async(kc, [&finished](std::exception_ptr error) { finished.set_value(std::move(error)); });
    }
    if (std::exception_ptr error = result.get()) std::rethrow_exception(error);
    return;
  }
  run_kernel(op, kernel.sync, *dev, attrs, ins, std::span<Tensor>(outs.data(), static_cast<size_t>(ic.num_outputs())),
             [&](size_t i) -> const TensorMeta& { return ic.output(static_cast<int>(i)); });
}

bool any_symbolic(std::span<const Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.is_symbolic()) return true;
  return false;
}

[[noreturn]] void symbolic_outside_graph(const OpDef& op) {
  throw FailedPrecondition("[" + op.display +
                           "] got a symbolic tensor outside of its graph: symbolic tensors can only be used while "
                           "the graph or function that made them is being built");
}

// Tracing: the op becomes a node; recording tapes see it with its symbolic outputs, so a
// gradient taken inside a traced function is itself traced.
std::vector<Tensor> record(EagerContext& ctx, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                           const SourceLocation& where) {
  InferContext ic(op, inputs, attrs);
  try {
    op.infer(ic);
  } catch (const Error&) {
    ctx.recorder->rethrow_with_context(op, attrs, where);
  }
  std::vector<Tensor> outs = ctx.recorder->record(op, inputs, attrs, ic, where);
  for (OpObserver* o : ctx.observers) o->on_op(op, inputs, outs, attrs);
  return outs;
}

}  // namespace

std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                             const SourceLocation& where) {
  check_inputs(op, inputs);
  EagerContext& ctx = eager_context();
  if (ctx.recorder) return record(ctx, op, inputs, attrs, where);
  InferContext ic(op, inputs, attrs);
  op.infer(ic);
  if (any_symbolic(inputs)) symbolic_outside_graph(op);
  std::vector<Tensor> outs(ic.num_outputs());
  run_eager(op, inputs, attrs, ic, outs);
  for (OpObserver* o : ctx.observers) o->on_op(op, inputs, outs, attrs);
  return outs;
}

Tensor dispatch1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, const SourceLocation& where) {
  check_inputs(op, inputs);
  EagerContext& ctx = eager_context();
  if (ctx.recorder) {
    std::vector<Tensor> outs = record(ctx, op, inputs, attrs, where);
    if (outs.size() != 1)
      throw Internal("[" + op.display + "] dispatch1 used for an op with " + std::to_string(outs.size()) + " outputs");
    return std::move(outs[0]);
  }
  InferContext ic(op, inputs, attrs);
  op.infer(ic);
  if (any_symbolic(inputs)) symbolic_outside_graph(op);
  std::array<Tensor, 1> outs;
  if (ic.num_outputs() != 1)
    throw Internal("[" + op.display + "] dispatch1 used for an op with " + std::to_string(ic.num_outputs()) +
                   " outputs");
  run_eager(op, inputs, attrs, ic, outs);
  for (OpObserver* o : ctx.observers) o->on_op(op, inputs, outs, attrs);
  return std::move(outs[0]);
}

}  // namespace weft
