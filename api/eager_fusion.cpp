#include "api/eager_fusion.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/defs/fused.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/pending_value.h"

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

// A deferred elementwise chain: a straight-line program over `inputs`, registers never reused
// (register r < inputs.size() is input r; instruction k writes inputs.size() + k).
class PendingElementwise final : public PendingValue {
 public:
  PendingElementwise(KernelFn kernel, Device& device, std::vector<Tensor> inputs, std::vector<fused::Instr> code)
      : kernel_(kernel), device_(device), inputs_(std::move(inputs)), code_(std::move(code)) {}

  void compute(const Tensor& out) override {
    std::vector<Tensor> inputs;
    std::vector<int64_t> program;
    {
      std::lock_guard lock(mu_);
      inputs = inputs_;
      program.reserve(code_.size() * 4);
      for (const fused::Instr& c : code_) program.insert(program.end(), {c.op, c.dst, c.a, c.b});
    }
    const auto registers = static_cast<int64_t>(inputs.size() + code_.size());
    const Attrs attrs{{"program", std::move(program)}, {"num_registers", registers}, {"output", registers - 1}};
    settle_before_kernel_if_any(inputs);  // an input pending on a program of another shape
    Tensor outs[1] = {out};
    run_kernel_into(fused_op(), kernel_, device_, attrs, inputs, outs);
  }

  void take_inputs(std::vector<Tensor>& into) override {
    std::lock_guard lock(mu_);
    into.swap(inputs_);
  }

  // The program and inputs, when the value has not been computed; false once it has (its inputs
  // are gone: it is then read as an input like any other tensor).
  bool snapshot(std::vector<Tensor>* inputs, std::vector<fused::Instr>* code) const {
    std::lock_guard lock(mu_);
    if (inputs_.empty()) return false;
    *inputs = inputs_;
    *code = code_;
    return true;
  }

  Device& device() const { return device_; }

 private:
  const KernelFn kernel_;
  Device& device_;
  mutable std::mutex mu_;  // inputs_ is taken by the computing thread while others may read it
  std::vector<Tensor> inputs_;
  const std::vector<fused::Instr> code_;
};

// One operand of the op being deferred: its own program when it is pending here on one of the
// op's shape, else the tensor itself as an input.
struct Operand {
  const TensorImpl* impl = nullptr;
  bool inlined = false;
  std::vector<Tensor> inputs;       // inlined: the operand's program's inputs
  std::vector<fused::Instr> code;   // inlined: its program
  int32_t result = -1;              // its register in the new program
};

Operand operand_of(const Tensor& t, const Shape& shape, DType dtype, Device& device) {
  Operand o{t.impl(), false, {}, {}, -1};
  auto* p = dynamic_cast<PendingElementwise*>(t.impl()->pending.load(std::memory_order_acquire));
  if (p && !p->computed() && &p->device() == &device && t.dtype() == dtype && t.shape() == shape)
    o.inlined = p->snapshot(&o.inputs, &o.code);
  if (!o.inlined) o.inputs = {t};
  return o;
}

int32_t index_of(std::vector<Tensor>& inputs, const Tensor& t) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].same_as(t)) return static_cast<int32_t>(i);
  inputs.push_back(t);
  return static_cast<int32_t>(inputs.size() - 1);
}

}  // namespace

void set_eager_fusion(EagerFusion mode) { g_mode.store(static_cast<int>(mode), std::memory_order_relaxed); }
EagerFusion eager_fusion() { return current_mode(); }

void evaluate(std::span<const Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (!t.is_symbolic()) compute_pending(*t.impl());
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
  Operand operands[2];
  const size_t n = inputs.size();
  for (size_t k = 0; k < n; ++k) {
    if (k == 1 && inputs[1].impl() == operands[0].impl) {
      operands[1].impl = operands[0].impl;
      continue;
    }
    operands[k] = operand_of(inputs[k], meta.shape, meta.dtype, device);
  }
  std::vector<Tensor> all_inputs;
  size_t instructions = 1;
  for (size_t k = 0; k < n; ++k) {
    for (const Tensor& t : operands[k].inputs) index_of(all_inputs, t);
    instructions += operands[k].code.size();
  }
  if (all_inputs.size() > kMaxInputs || all_inputs.size() + instructions > kMaxRegisters) return {};

  const auto num_inputs = static_cast<int32_t>(all_inputs.size());
  std::vector<fused::Instr> code;
  code.reserve(instructions);
  for (size_t k = 0; k < n; ++k) {
    Operand& o = operands[k];
    if (o.inputs.empty()) {  // the same tensor as operand 0
      o.result = operands[0].result;
      continue;
    }
    if (!o.inlined) {
      o.result = index_of(all_inputs, o.inputs[0]);
      continue;
    }
    // The operand's registers renumbered: its inputs to theirs here, its temporaries after ours.
    const auto its_inputs = static_cast<int32_t>(o.inputs.size());
    const auto base = num_inputs + static_cast<int32_t>(code.size());
    auto reg = [&](int32_t r) {
      return r < 0 ? -1 : r < its_inputs ? index_of(all_inputs, o.inputs[static_cast<size_t>(r)]) : base + r - its_inputs;
    };
    for (const fused::Instr& c : o.code) code.push_back({c.op, reg(c.dst), reg(c.a), reg(c.b)});
    o.result = static_cast<int32_t>(num_inputs + code.size() - 1);
  }
  const auto dst = static_cast<int32_t>(num_inputs + code.size());
  code.push_back({opcode, dst, operands[0].result, n == 2 ? operands[1].result : -1});

  Tensor out = Tensor::empty(meta.dtype, meta.shape, &device);
  attach_pending(*out.impl(),
                 std::make_unique<PendingElementwise>(kernel, device, std::move(all_inputs), std::move(code)));
  return out;
}

}  // namespace weft
