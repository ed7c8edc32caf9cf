#include "api/eager_fusion.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/defs/fused.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/pending_value.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

// Programs stay within what the CUDA kernel takes as a launch argument and runs with its small
// register file (kernels/cuda/fused.cu): registers are never reused here, one per input and one
// per instruction.
constexpr size_t kMaxInputs = 8;
constexpr size_t kMaxRegisters = 32;

EagerFusion mode_from_environment() {
  const char* v = std::getenv("WEFT_EAGER_FUSION");
  if (!v || !*v) return EagerFusion::Gpus;
  const std::string s = v;
  if (s == "off") return EagerFusion::Off;
  if (s == "gpus") return EagerFusion::Gpus;
  if (s == "all") return EagerFusion::All;
  throw InvalidArgument("[eager fusion] WEFT_EAGER_FUSION='" + s + "' is not one of off, gpus, all");
}

// -1: not read from the environment yet.
std::atomic<int> g_mode{-1};

EagerFusion current_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) [[unlikely]] {
    m = static_cast<int>(mode_from_environment());
    int expected = -1;
    if (!g_mode.compare_exchange_strong(expected, m)) m = expected;
  }
  return static_cast<EagerFusion>(m);
}

bool fuses_on(const Device& device) {
  switch (current_mode()) {
    case EagerFusion::Off: return false;
    case EagerFusion::Gpus: return device.type() == DeviceType::CUDA;
    case EagerFusion::All: return true;
  }
  return false;
}

const OpDef& fused_op() {
  static const OpDef& op = [] {
    register_builtin_ops();
    return op_registry().get("FusedElementwise");
  }();
  return op;
}

// A straight-line program over `inputs`, registers never reused: register r < num_inputs is
// input r; instruction k writes num_inputs + k. Fixed arrays: deferring an op allocates nothing
// but its output and its pending value.
struct Chain {
  std::array<Tensor, kMaxInputs> inputs;
  int num_inputs = 0;
  std::array<fused::Instr, kMaxRegisters> code;
  int count = 0;

  Chain() = default;
  Chain(const Chain&) = delete;
  Chain& operator=(const Chain&) = delete;
  // Into a fresh chain, the parts in use only: copying the whole arrays showed in the per-op cost.
  void copy_from(const Chain& from) {
    std::copy_n(from.inputs.begin(), from.num_inputs, inputs.begin());
    std::copy_n(from.code.begin(), from.count, code.begin());
    num_inputs = from.num_inputs;
    count = from.count;
  }

  std::span<const Tensor> input_span() const { return {inputs.data(), static_cast<size_t>(num_inputs)}; }
  // The register of input `t`, added when new; -1 when the inputs are full.
  int32_t input_register(const Tensor& t) {
    for (int i = 0; i < num_inputs; ++i)
      if (inputs[static_cast<size_t>(i)].same_as(t)) return i;
    if (num_inputs == static_cast<int>(kMaxInputs)) return -1;
    inputs[static_cast<size_t>(num_inputs)] = t;
    return num_inputs++;
  }
};

// A deferred elementwise chain, computed as one FusedElementwise.
class PendingElementwise final : public PendingValue {
 public:
  PendingElementwise(KernelFn kernel, Device& device, const Chain& chain) : kernel_(kernel), device_(device) {
    chain_.copy_from(chain);
  }

  // chain_ is read here with no lock: its only writer, release_inputs, runs after this on the same
  // thread (PendingValue's contract); snapshot only reads.
  void compute(const Tensor& out) override {
    fused::NodeProgram program;  // decoded already: the kernel is handed it as prepared
    std::copy_n(chain_.code.begin(), chain_.count, program.code);
    program.count = chain_.count;
    program.num_registers = chain_.num_inputs + chain_.count;
    program.output = static_cast<int>(program.num_registers - 1);
    const std::span<const Tensor> inputs = chain_.input_span();
    settle_before_kernel_if_any(inputs);  // an input pending on a program of another shape
    static const Attrs no_attrs;
    Tensor outs[1] = {out};
    run_kernel_into(fused_op(), kernel_, device_, no_attrs, inputs, outs, nullptr, 0, &program);
  }

  void release_inputs() override {
    std::array<Tensor, kMaxInputs> released;  // let go of after unlocking
    std::lock_guard lock(mu_);
    std::swap(released, chain_.inputs);
    chain_.num_inputs = 0;
  }

  // The chain, when the value has not been computed; false once it has (its inputs are gone: it
  // is then read as an input like any other tensor).
  bool snapshot(Chain* into) const {
    std::lock_guard lock(mu_);
    if (chain_.num_inputs == 0) return false;
    into->copy_from(chain_);
    return true;
  }

  Device& device() const { return device_; }

 private:
  const KernelFn kernel_;
  Device& device_;
  mutable std::mutex mu_;  // release_inputs empties chain_.inputs while other threads may snapshot it
  Chain chain_;
};

// The chain of operand `t` when it is pending here on a program of the op's shape and dtype
// (its program is taken into the op's), else false.
bool inlined_chain(const Tensor& t, const Shape& shape, DType dtype, Device& device, Chain* into) {
  auto* p = dynamic_cast<PendingElementwise*>(tensor_impl(t)->pending.load(std::memory_order_acquire));
  return p && !p->computed() && &p->device() == &device && t.dtype() == dtype && t.shape() == shape &&
         p->snapshot(into);
}

}  // namespace

void set_eager_fusion(EagerFusion mode) { g_mode.store(static_cast<int>(mode), std::memory_order_relaxed); }
EagerFusion eager_fusion() { return current_mode(); }

void evaluate(std::span<const Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (!t.is_symbolic()) compute_pending(*tensor_impl(t));
}

Tensor defer_elementwise(const OpDef& op, std::span<const Tensor> inputs, const InferContext& ic, Device& device) {
  if (!fuses_on(device) || !op.has(kElementwise) || op.has(kStateful) || op.has(kSideEffect) ||
      op.has(kForwardsInput) || ic.num_outputs() != 1)
    return {};
  const int opcode = fused::opcode_for(op.name);
  if (opcode < 0 || fused::kOpcodes[opcode].arity != static_cast<int>(inputs.size())) return {};
  const TensorMeta& meta = ic.output(0);
  if (meta.dtype != DType::Float32 && meta.dtype != DType::Float64) return {};
  for (const Tensor& t : inputs)
    if (t.dtype() != meta.dtype || t.device_ptr() != &device) return {};
  const KernelFn kernel = fused_op().kernel(device.type(), meta.dtype);
  if (!kernel) return {};

  // The operands' programs one after the other, then the op; x * x takes x's program once.
  // Temporaries are numbered from kMaxInputs while the inputs are being gathered, then moved down
  // to follow them.
  constexpr auto kFirstTemporary = static_cast<int32_t>(kMaxInputs);
  Chain chain;
  int32_t sources[2] = {-1, -1};
  const size_t n = inputs.size();
  for (size_t k = 0; k < n; ++k) {
    if (k == 1 && inputs[1].same_as(inputs[0])) {
      sources[1] = sources[0];
      continue;
    }
    Chain operand;
    if (!inlined_chain(inputs[k], meta.shape, meta.dtype, device, &operand)) {
      sources[k] = chain.input_register(inputs[k]);
      if (sources[k] < 0) return {};
      continue;
    }
    if (chain.count + operand.count + 1 > static_cast<int>(kMaxRegisters)) return {};
    int32_t renumbered[kMaxRegisters];  // the operand's registers here
    for (int r = 0; r < operand.num_inputs; ++r) {
      renumbered[r] = chain.input_register(operand.inputs[static_cast<size_t>(r)]);
      if (renumbered[r] < 0) return {};
    }
    for (int c = 0; c < operand.count; ++c) renumbered[operand.num_inputs + c] = kFirstTemporary + chain.count + c;
    for (int c = 0; c < operand.count; ++c) {
      const fused::Instr& in = operand.code[static_cast<size_t>(c)];
      chain.code[static_cast<size_t>(chain.count++)] = {in.op, renumbered[in.dst], renumbered[in.a],
                                                       in.b < 0 ? -1 : renumbered[in.b]};
    }
    sources[k] = kFirstTemporary + chain.count - 1;
  }
  chain.code[static_cast<size_t>(chain.count)] = {opcode, kFirstTemporary + chain.count, sources[0],
                                                  n == 2 ? sources[1] : -1};
  ++chain.count;
  if (chain.num_inputs + chain.count > static_cast<int>(kMaxRegisters)) return {};
  const int32_t shift = kFirstTemporary - chain.num_inputs;
  auto settled = [&](int32_t r) { return r >= kFirstTemporary ? r - shift : r; };
  for (int c = 0; c < chain.count; ++c) {
    fused::Instr& in = chain.code[static_cast<size_t>(c)];
    in = {in.op, settled(in.dst), settled(in.a), settled(in.b)};
  }

  Tensor out = Tensor::empty(meta.dtype, meta.shape, &device);
  attach_pending(*tensor_impl(out), std::make_unique<PendingElementwise>(kernel, device, chain));
  return out;
}

}  // namespace weft
