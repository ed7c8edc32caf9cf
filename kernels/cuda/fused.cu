// CUDA kernel of FusedElementwise (kernels/defs/fused.h), float32 and float64 as on the CPU
// (kernels/cpu/fused.cpp). One launch: each thread takes output elements, loads every input at
// its broadcast offset, runs the program in registers and stores the output register. Every
// opcode calls the functor of the CUDA kernel of its op (elementwise_ops.cuh), so a fused program
// gives the bits the separate CUDA ops give.
//
// The program and the inputs' geometry travel with the launch as one kernel argument when they
// are small (up to kInlineInstrs instructions and kInlineInputs inputs: an eager chain, and nearly
// every traced group), so a call is one launch and nothing else; a larger program goes to the GPU
// in a small buffer copied on the stream first (a pageable copy costs the host several
// microseconds, more than the launch). Either way the program is then staged in shared memory
// per block. Inputs with the output's element count are read at the output's index, as on
// the CPU, one-element inputs at 0, and the others through their own merged broadcast strides.
// Each output element is written by the thread that read the inputs' elements at that index,
// after reading them, so the output may alias an input of its shape.
#include <cuda_runtime.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/cuda/elementwise_ops.cuh"
#include "kernels/defs/fused.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

using fused::Instr;

enum InputKind : int32_t { kFull = 0, kScalar = 1, kBroadcast = 2 };

struct FusedInput {
  const void* data;
  int32_t kind;
  int32_t rank;                          // kBroadcast: merged dims of the output, strides of this input
  int64_t dims[kMaxElementwiseRank];
  int64_t strides[kMaxElementwiseRank];
};

// One opcode on one value (b is ignored by the unary ones), through the functor of the op's own
// CUDA kernel (the opcode list is kernels/defs/fused.h's).
template <int kArity, class Op, class T>
__device__ __forceinline__ T apply_op(Op op, T a, T b) {
  if constexpr (kArity == 1) return op(a);
  else return op(a, b);
}

template <class T>
__device__ __forceinline__ T apply(int32_t op, T a, T b) {
  switch (op) {
#define WEFT_APPLY_OPCODE(OP, ARITY, EXPENSIVE) \
  case fused::k##OP: return apply_op<ARITY>(OP##Op{}, a, b);
    WEFT_FUSED_OPS(WEFT_APPLY_OPCODE)
#undef WEFT_APPLY_OPCODE
    default: return a;  // unreachable: decode_program checked every opcode
  }
}

// A program small enough to be a kernel argument (4 KiB at most; this is about 1.7 KiB).
inline constexpr int kInlineInstrs = 32;
inline constexpr int kInlineInputs = 8;
struct InlineProgram {
  Instr code[kInlineInstrs];
  FusedInput inputs[kInlineInputs];
};
static_assert(sizeof(InlineProgram) + 64 <= 4096, "kernel arguments are limited to 4 KiB");

// Index is uint32_t when the output has fewer than 2^31 elements (cheaper division), else int64_t;
// kRegs bounds the program's registers (the register file is a local array). `program` and
// `inputs` point to global memory or into the launch's __grid_constant__ argument.
template <class T, int kRegs, class Index>
__device__ __forceinline__ void run_program(const Instr* __restrict__ program, int count,
                                            const FusedInput* __restrict__ inputs, int num_inputs, int output, T* out,
                                            int64_t n) {
  __shared__ Instr code[fused::kMaxInstructions];
  for (int k = threadIdx.x; k < count; k += blockDim.x) code[k] = program[k];
  __syncthreads();
  const Index total = static_cast<Index>(n);
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    T reg[kRegs];
    for (int q = 0; q < num_inputs; ++q) {
      const FusedInput& in = inputs[q];
      Index off = 0;
      if (in.kind == kFull) {
        off = i;
      } else if (in.kind == kBroadcast) {
        Index rem = i;
        for (int d = in.rank - 1; d >= 0; --d) {
          const Index dim = static_cast<Index>(in.dims[d]);
          off += (rem % dim) * static_cast<Index>(in.strides[d]);
          rem /= dim;
        }
      }
      reg[q] = static_cast<const T*>(in.data)[off];
    }
    for (int k = 0; k < count; ++k) {
      const Instr c = code[k];
      reg[c.dst] = apply<T>(c.op, reg[c.a], c.b >= 0 ? reg[c.b] : T(0));
    }
    out[i] = reg[output];
  }
}

template <class T, int kRegs, class Index>
__global__ void fused_table_kernel(const Instr* __restrict__ program, int count, const FusedInput* __restrict__ inputs,
                                   int num_inputs, int output, T* out, int64_t n) {
  run_program<T, kRegs, Index>(program, count, inputs, num_inputs, output, out, n);
}

// __grid_constant__: the argument is read where the launch put it, never copied per thread.
template <class T, int kRegs, class Index>
__global__ void fused_inline_kernel(const __grid_constant__ InlineProgram p, int count, int num_inputs, int output,
                                    T* out, int64_t n) {
  run_program<T, kRegs, Index>(p.code, count, p.inputs, num_inputs, output, out, n);
}

// Where the program comes from: a table in device memory, or the kernel argument.
struct ProgramSource {
  const Instr* table_program = nullptr;  // null: `inline_program` holds it
  const FusedInput* table_inputs = nullptr;
  const InlineProgram* inline_program = nullptr;
};

template <class T, int kRegs, class Index>
void launch_with(cudaStream_t stream, const LaunchGeometry& lg, const ProgramSource& src, int count, int num_inputs,
                 int output, T* out, int64_t n) {
  if (src.inline_program)
    fused_inline_kernel<T, kRegs, Index>
        <<<lg.blocks, lg.threads, 0, stream>>>(*src.inline_program, count, num_inputs, output, out, n);
  else
    fused_table_kernel<T, kRegs, Index>
        <<<lg.blocks, lg.threads, 0, stream>>>(src.table_program, count, src.table_inputs, num_inputs, output, out, n);
}

template <class T, int kRegs>
void launch(const KernelContext& ctx, const ProgramSource& src, int count, int num_inputs, int output, T* out,
            int64_t n) {
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  if (n <= std::numeric_limits<int32_t>::max())
    launch_with<T, kRegs, uint32_t>(cu.stream, lg, src, count, num_inputs, output, out, n);
  else
    launch_with<T, kRegs, int64_t>(cu.stream, lg, src, count, num_inputs, output, out, n);
  check_launch(ctx);
}

template <class T>
void fused_kernel(KernelContext& ctx) {
  Tensor& out_t = ctx.output(0);
  const int64_t n = out_t.size();
  if (n == 0) return;
  const int num_inputs = static_cast<int>(ctx.inputs.size());
  fused::NodeProgram decoded;  // unless the caller prepared it
  const fused::NodeProgram& prog = fused::node_program(ctx, decoded);

  const Shape& out_shape = out_t.shape();
  std::vector<FusedInput> inputs(static_cast<size_t>(num_inputs));
  for (int q = 0; q < num_inputs; ++q) {
    const Tensor& in = ctx.input(q);
    FusedInput& f = inputs[q];
    std::memset(&f, 0, sizeof f);
    f.data = raw_data(in);
    const int64_t size = in.size();
    f.kind = size == n ? kFull : size == 1 ? kScalar : kBroadcast;
    if (f.kind != kBroadcast) continue;
    const Shape& s = in.shape();
    bool fits = s.rank() <= out_shape.rank();
    for (int64_t d = 0; fits && d < s.rank(); ++d) {
      const int64_t od = out_shape[out_shape.rank() - s.rank() + d];
      fits = s[d] == od || s[d] == 1;
    }
    if (!fits)
      ctx.fail("input " + std::to_string(q) + " of shape " + s.to_string() + " does not broadcast to the output shape " +
               out_shape.to_string());
    const BroadcastStrides g = broadcast_strides(out_shape, {&s}, ctx.op.display);
    f.rank = g.rank;
    for (int d = 0; d < g.rank; ++d) {
      f.dims[d] = g.dims[d];
      f.strides[d] = g.strides[0][d];
    }
  }

  T* out = static_cast<T*>(raw_data(out_t));
  ProgramSource src;
  InlineProgram inline_program;  // the launch copies it into the kernel's argument
  Tensor table;                  // the larger programs' device copy, freed in stream order
  if (prog.count <= kInlineInstrs && num_inputs <= kInlineInputs) {
    std::memcpy(inline_program.code, prog.code, sizeof(Instr) * static_cast<size_t>(prog.count));
    std::memcpy(inline_program.inputs, inputs.data(), sizeof(FusedInput) * inputs.size());
    src.inline_program = &inline_program;
  } else {
    // [program][inputs] in one device buffer; FusedInput's 8-byte alignment holds after 16-byte Instrs.
    const size_t program_bytes = sizeof(Instr) * static_cast<size_t>(prog.count);
    const size_t bytes = program_bytes + sizeof(FusedInput) * inputs.size();
    std::vector<unsigned char> host(bytes);
    std::memcpy(host.data(), prog.code, program_bytes);
    std::memcpy(host.data() + program_bytes, inputs.data(), sizeof(FusedInput) * inputs.size());
    table = Tensor::empty(uint8, Shape{static_cast<int64_t>(bytes)}, &ctx.device);
    CudaContext& cu = cuda_context(ctx);
    // From pageable memory this returns once `host` has been read; the copy is ordered on the stream.
    check_cuda(cudaMemcpyAsync(raw_data(table), host.data(), bytes, cudaMemcpyHostToDevice, cu.stream),
               "copying a fused program to the GPU");
    src.table_program = static_cast<const Instr*>(raw_data(table));
    src.table_inputs = reinterpret_cast<const FusedInput*>(static_cast<const unsigned char*>(raw_data(table)) +
                                                           program_bytes);
  }
  if (prog.num_registers <= 8) launch<T, 8>(ctx, src, prog.count, num_inputs, prog.output, out, n);
  else if (prog.num_registers <= 32) launch<T, 32>(ctx, src, prog.count, num_inputs, prog.output, out, n);
  else launch<T, fused::kMaxRegisters>(ctx, src, prog.count, num_inputs, prog.output, out, n);
}

}  // namespace

void register_fused_kernels() {
  register_kernel("FusedElementwise", DeviceType::CUDA, float32, fused_kernel<float>);
  register_kernel("FusedElementwise", DeviceType::CUDA, float64, fused_kernel<double>);
}

}  // namespace weft::cuda
