// The instruction set of FusedElementwise, shared by its definition, its kernels and the fusion
// pass that writes its programs.
//
// A program is a straight line of instructions over registers, each register one value of the
// output's shape (inputs broadcast to it). Registers 0 .. num_inputs-1 hold the inputs and are
// read-only; num_inputs .. num_registers-1 are temporaries. The attributes:
//
//   "program"        IntList, four ints per instruction: opcode, dst, src1, src2 (-1 for unary ops)
//   "num_registers"  Int
//   "output"         Int, the register holding the result once the program has run
//
// relu(a + b) with inputs a, b is program {Add, 2, 0, 1,  Relu, 3, 2, -1}, num_registers 4,
// output 3. Registers may be reused once dead (the pass does), but an instruction never writes a
// register it reads, so every inner loop runs over three disjoint arrays and vectorises.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace weft {
class Attrs;
struct KernelContext;
}

namespace weft::fused {

// The ops FusedElementwise computes, one X(op, arity, expensive) each: `op` the OpDef whose
// numerics the opcode reproduces exactly, `expensive` a transcendental function (worth splitting
// over threads sooner). An op's opcode is its place in this list, and saved graphs store opcodes:
// append only, never reorder or remove. This list is the whole table: the opcodes below, the
// fusion passes (scheduler/passes/fuse_elementwise.cpp, api/eager_fusion.cpp) through opcode_for,
// and the CPU and CUDA kernels, which run opcode k<op> through the op's own functor, <op>Op
// (kernels/shared_elementwise_ops.h, or the device's kernels/cpu/elementwise_ops.h and
// kernels/cuda/elementwise_ops.cuh). Adding a fusable op is one entry here (kernels/defs/README.md).
#define WEFT_FUSED_OPS(X) \
  X(Neg, 1, false)        \
  X(Abs, 1, false)        \
  X(Sign, 1, false)       \
  X(Square, 1, false)     \
  X(Exp, 1, true)         \
  X(Log, 1, true)         \
  X(Sqrt, 1, false)       \
  X(Rsqrt, 1, false)      \
  X(Relu, 1, false)       \
  X(Sigmoid, 1, true)     \
  X(Tanh, 1, true)        \
  X(Add, 2, false)        \
  X(Sub, 2, false)        \
  X(Mul, 2, false)        \
  X(Div, 2, false)        \
  X(Maximum, 2, false)    \
  X(Minimum, 2, false)    \
  X(Erf, 1, true)         \
  X(Gelu, 1, true)

#define WEFT_FUSED_OPCODE(OP, ARITY, EXPENSIVE) k##OP,
enum Opcode : int32_t { WEFT_FUSED_OPS(WEFT_FUSED_OPCODE) kNumOpcodes };
#undef WEFT_FUSED_OPCODE

struct OpcodeInfo {
  const char* op;   // the op whose numerics the opcode reproduces exactly
  int arity;
  bool expensive;   // a transcendental function: worth splitting over threads sooner
};

#define WEFT_FUSED_OPCODE_INFO(OP, ARITY, EXPENSIVE) {#OP, ARITY, EXPENSIVE},
inline constexpr OpcodeInfo kOpcodes[kNumOpcodes] = {WEFT_FUSED_OPS(WEFT_FUSED_OPCODE_INFO)};
#undef WEFT_FUSED_OPCODE_INFO

// The opcode computing op `type`, or -1 when FusedElementwise cannot express it.
int opcode_for(std::string_view type);

// Bounds that keep a kernel's per-call state on the stack.
inline constexpr int64_t kMaxRegisters = 256;
inline constexpr int64_t kMaxInstructions = 256;

struct Instr {
  int32_t op, dst, a, b;
};

// Decodes `program` into `out` (room for kMaxInstructions) and checks it: opcodes known, every
// source defined before it is read, destinations temporaries distinct from their sources, the
// output register written. Returns the instruction count, or -1 with `error` set.
int decode_program(std::span<const int64_t> program, int64_t num_inputs, int64_t num_registers, int64_t output,
                   Instr* out, std::string* error);

// A FusedElementwise node's program, decoded and checked: what its kernels run.
struct NodeProgram {
  Instr code[kMaxInstructions];
  int count = 0;
  int64_t num_registers = 0;
  int output = 0;  // the register holding the result
};

// Decodes a node's attributes ("program", "num_registers", "output") into `out`; false, with
// decode_program's reason in `error`, for a bad program.
bool decode_node_attrs(const Attrs& attrs, int64_t num_inputs, NodeProgram* out, std::string* error);

// FusedElementwise's OpDef::prepare: the node's NodeProgram, decoded once instead of per call.
// InvalidArgument for a bad program.
std::shared_ptr<const void> prepare_node_program(const Attrs& attrs, int num_inputs);

// The program a kernel runs: ctx.prepared when its caller decoded it (the executor, once per node;
// eager fusion, which builds its programs decoded), else decoded from ctx.attrs into `storage`. A
// bad one fails the kernel with decode_program's reason. The CPU and CUDA kernels' shared start.
const NodeProgram& node_program(const KernelContext& ctx, NodeProgram& storage);

}  // namespace weft::fused
