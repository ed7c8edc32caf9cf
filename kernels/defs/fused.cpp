// Definitions of the ops the fusion pass emits: FusedElementwise (a straight-line program of
// elementwise ops over broadcast inputs, see fused.h) and FusedMatMul (a MatMul of a matrix B, A
// of rank 2 or, without transpose_a, higher, with a bias row added and an optional activation
// applied to its output; or, with activation "relu_grad", ReluGrad(A B, x): the backward pass's
// product masked where the relu's x is not positive, its third input x of the output's shape).
#include "kernels/defs/fused.h"

#include <algorithm>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft {

namespace fused {

int opcode_for(std::string_view type) {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (type == kOpcodes[i].op) return i;
  return -1;
}

int decode_program(std::span<const int64_t> program, int64_t num_inputs, int64_t num_registers, int64_t output,
                   Instr* out, std::string* error) {
  auto fail = [&](std::string message) {
    *error = std::move(message);
    return -1;
  };
  if (num_registers < num_inputs || num_registers > kMaxRegisters)
    return fail("num_registers " + std::to_string(num_registers) + " must be in [" + std::to_string(num_inputs) +
                ", " + std::to_string(kMaxRegisters) + "] for " + std::to_string(num_inputs) + " inputs");
  if (program.size() % 4 != 0) return fail("program length " + std::to_string(program.size()) + " is not a multiple of 4");
  const int64_t count = static_cast<int64_t>(program.size() / 4);
  if (count > kMaxInstructions)
    return fail("program has " + std::to_string(count) + " instructions; at most " + std::to_string(kMaxInstructions));
  // Which registers hold a value: the inputs at first, then whatever has been written.
  // Only the first num_registers entries are used: initialising all kMaxRegisters showed up in the
  // per-call cost of small fused kernels.
  bool defined[kMaxRegisters];
  std::fill(defined, defined + num_inputs, true);
  std::fill(defined + num_inputs, defined + num_registers, false);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t op = program[4 * i], dst = program[4 * i + 1], a = program[4 * i + 2], b = program[4 * i + 3];
    // Built only on failure: the kernel decodes on every call.
    auto at = [i] { return "instruction " + std::to_string(i) + ": "; };
    if (op < 0 || op >= kNumOpcodes) return fail(at() + "unknown opcode " + std::to_string(op));
    const bool binary = kOpcodes[op].arity == 2;
    if (dst < num_inputs || dst >= num_registers)
      return fail(at() + "destination register " + std::to_string(dst) + " is not a temporary (" +
                  std::to_string(num_inputs) + " to " + std::to_string(num_registers - 1) + ")");
    if (!binary && b != -1) return fail(at() + kOpcodes[op].op + " takes one source; src2 must be -1");
    for (int64_t src : {a, binary ? b : a}) {
      if (src < 0 || src >= num_registers || !defined[src])
        return fail(at() + "source register " + std::to_string(src) + " is read before it is written");
      if (src == dst) return fail(at() + "destination register " + std::to_string(dst) + " is also a source");
    }
    defined[dst] = true;
    out[i] = {static_cast<int32_t>(op), static_cast<int32_t>(dst), static_cast<int32_t>(a),
              static_cast<int32_t>(binary ? b : -1)};
  }
  if (output < num_inputs || output >= num_registers || !defined[output])
    return fail("output register " + std::to_string(output) + " is not written by the program");
  return static_cast<int>(count);
}

bool decode_node_attrs(const Attrs& attrs, int64_t num_inputs, NodeProgram* out, std::string* error) {
  out->num_registers = attrs.get<int64_t>("num_registers");
  const int64_t output = attrs.get<int64_t>("output");
  out->count = decode_program(attrs.get<std::vector<int64_t>>("program"), num_inputs, out->num_registers, output,
                              out->code, error);
  out->output = static_cast<int>(output);  // checked when count >= 0: a register below num_registers
  return out->count >= 0;
}

std::shared_ptr<const void> prepare_node_program(const Attrs& attrs, int num_inputs) {
  auto p = std::make_shared<NodeProgram>();
  std::string error;
  if (!decode_node_attrs(attrs, num_inputs, p.get(), &error)) throw InvalidArgument("[fused_elementwise] " + error);
  return p;
}

const NodeProgram& node_program(const KernelContext& ctx, NodeProgram& storage) {
  if (ctx.prepared) return *static_cast<const NodeProgram*>(ctx.prepared);
  std::string error;
  if (!decode_node_attrs(ctx.attrs, static_cast<int64_t>(ctx.inputs.size()), &storage, &error)) ctx.fail(error);
  return storage;
}

}  // namespace fused

namespace defs {

namespace {

void infer_fused_elementwise(InferContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("needs at least one input");
  check_dtype_in(ctx, 0, kFloating);
  check_same_dtype(ctx, 0, ctx.num_inputs());
  Shape out = ctx.input_shape(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) out = broadcast_shapes(ctx, out, ctx.input_shape(i));
  const auto& program = ctx.attrs().get<std::vector<int64_t>>("program");
  fused::Instr decoded[fused::kMaxInstructions];
  std::string error;
  if (fused::decode_program(program, ctx.num_inputs(), ctx.attrs().get<int64_t>("num_registers"),
                            ctx.attrs().get<int64_t>("output"), decoded, &error) < 0)
    ctx.fail(error);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

Cost fused_elementwise_cost(const InferContext& ctx) {
  const auto& program = ctx.attrs().get<std::vector<int64_t>>("program");
  double per_element = 0;
  for (size_t i = 0; i + 3 < program.size(); i += 4) {
    const int64_t op = program[i];
    per_element += (op >= 0 && op < fused::kNumOpcodes && fused::kOpcodes[op].expensive) ? 20 : 1;
  }
  const double n = static_cast<double>(std::max<int64_t>(ctx.output(0).shape.num_elements(), 0));
  double elements = n;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    elements += static_cast<double>(std::max<int64_t>(ctx.input_shape(i).num_elements(), 0));
  return {per_element * n, elements * dtype_size(ctx.output(0).dtype)};
}

void infer_fused_matmul(InferContext& ctx) {
  // float16 and bfloat16: cuBLASLt on a GPU, through float32 on the CPU, as MatMul (linalg.cpp).
  check_dtype_in(ctx, 0, {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16});
  check_same_dtype(ctx, 0, 3);
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  const Shape& bias = ctx.input_shape(2);
  const bool ta = ctx.attrs().get_or<bool>("transpose_a", false);
  const bool tb = ctx.attrs().get_or<bool>("transpose_b", false);
  // A's leading dims are rows of one GEMM, which transpose_a would scatter.
  if (a.rank() < 2 || b.rank() != 2 || (ta && a.rank() != 2))
    ctx.fail("operands must have ranks 2 x 2, or higher x 2 without transpose_a, got " + a.to_string() + " x " +
             b.to_string() + (ta ? " with transpose_a" : ""));
  const int64_t r = a.rank();
  const int64_t m = ta ? a[1] : a[r - 2], ka = ta ? a[0] : a[r - 1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka >= 0 && kb >= 0 && ka != kb)
    ctx.fail("inner dimensions differ: " + a.to_string() + " x " + b.to_string() + (ta ? " with transpose_a" : "") +
             (tb ? " with transpose_b" : ""));
  const std::string& act = ctx.attrs().get_or<std::string>("activation", "");
  if (act != "" && act != "relu" && act != "sigmoid" && act != "tanh" && act != "relu_grad")
    ctx.fail("unknown activation '" + act + "' (supported: '', 'relu', 'sigmoid', 'tanh', 'relu_grad')");
  Shape out(std::span<const int64_t>(a.data(), r - 2));
  out.push_back(m);
  if (act == "relu_grad") {
    // The third input is the relu's x, of the product's shape: C = x > 0 ? A B : 0.
    out.push_back(n);
    bool fits = bias.rank() == out.rank();
    for (int64_t d = 0; fits && d < out.rank(); ++d) {
      fits = out[d] < 0 || bias[d] < 0 || out[d] == bias[d];
      if (fits && out[d] < 0) out[d] = bias[d];  // what x knows of an unknown dim
    }
    if (!fits) ctx.fail("relu_grad's x must have the product's shape " + out.to_string() + ", got " + bias.to_string());
  } else {
    if (bias.rank() != 1 || (bias[0] >= 0 && n >= 0 && bias[0] != n))
      ctx.fail("bias must have shape (" + std::to_string(n) + ",), got " + bias.to_string());
    out.push_back(n >= 0 ? n : bias[0]);
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

Cost fused_matmul_cost(const InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const bool ta = ctx.attrs().get_or<bool>("transpose_a", false);
  const double k = static_cast<double>(std::max<int64_t>(ta ? a[0] : a[a.rank() - 1], 0));
  const double out = static_cast<double>(std::max<int64_t>(ctx.output(0).shape.num_elements(), 0));
  double bytes = out;
  for (int i = 0; i < 3; ++i) bytes += static_cast<double>(std::max<int64_t>(ctx.input_shape(i).num_elements(), 0));
  const std::string& act = ctx.attrs().get_or<std::string>("activation", "");
  const bool transcendental = act == "sigmoid" || act == "tanh";
  return {out * (2 * k + (transcendental ? 21 : 2)), bytes * dtype_size(ctx.output(0).dtype)};
}

}  // namespace

void register_fused_defs() {
  // Elementwise, so that the executor may write the result over a dead input of the same shape;
  // not differentiable, because fusion runs after tapes and gradients have been built.
  op_registry().add({.name = "FusedElementwise", .display = "fused_elementwise", .min_inputs = 1, .max_inputs = -1,
                     .attrs = {{"program", AttrType::IntList},
                               {"num_registers", AttrType::Int},
                               {"output", AttrType::Int}},
                     .infer = infer_fused_elementwise, .cost = fused_elementwise_cost,
                     .prepare = fused::prepare_node_program, .flags = kElementwise | kNotDifferentiable});
  op_registry().add({.name = "FusedMatMul", .display = "fused_matmul", .min_inputs = 3, .max_inputs = 3,
                     .attrs = {{"transpose_a", AttrType::Bool, false},
                               {"transpose_b", AttrType::Bool, false},
                               {"activation", AttrType::String, false}},
                     .infer = infer_fused_matmul, .cost = fused_matmul_cost, .flags = kNotDifferentiable});
}

}  // namespace defs

}  // namespace weft
