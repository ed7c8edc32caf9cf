// CPU kernels of the fused ops.
//
// FusedElementwise runs its program (kernels/defs/fused.h) over the output in blocks of at most
// kMaxBlock elements. Every register of a block is a small array: an input that has the output's
// shape is read in place, a scalar or broadcast input is expanded into a buffer, and temporaries
// live in a stack scratch area sized to stay in L1. Each instruction is one loop over its block,
// so the loops vectorise and the values between instructions never leave L1: relu(a + b) reads a
// and b once and writes the result once. The result is staged and then copied out (streamed for
// large outputs), after the block's inputs have been read, so the output may alias an input of
// its shape. Every opcode runs its op's functor (elementwise_ops.h), the function the op's own
// kernel runs, in the same order, so results are bitwise equal to the unfused chain.
//
// FusedMatMul computes C = act(A B + bias), A of any rank >= 2 (its leading dims folded into
// rows) against a matrix B, or, with activation "relu_grad", C = ReluGrad(A B, x) (its third input
// x of C's shape): with weft's own GEMM (gemm.h), bias and relu, or the ReluGrad mask, are
// applied to each tile of C in registers before it is stored; otherwise gemm_rows runs the
// epilogue on each tile of rows as soon as it is computed, while it is still in cache, instead of
// more passes over C.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bias_epilogue.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/defs/fused.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

using fused::Instr;

// Per-task scratch for temporaries and broadcast inputs: about L1.
constexpr size_t kScratchBytes = size_t{32} << 10;
constexpr int64_t kMaxBlock = 1024;
constexpr int64_t kMinBlock = 16;

// Each opcode runs its op's own functor over the block (elementwise_ops.h), the one the op's
// kernel runs: the same function, not a copy of it, so fused and unfused results are bitwise equal.
#define WEFT_CHECK_OPCODE(OP, ARITY, EXPENSIVE)                                                     \
  static_assert((ARITY == 1) == (BlockMath<OP##Op> || std::is_invocable_v<const OP##Op&, float>), \
                "the opcode table and the functor disagree on the arity of " #OP);                \
  static_assert(EXPENSIVE == expensive_v<OP##Op, float>,                                            \
                "the opcode table and the functor disagree on whether " #OP " is expensive");
WEFT_FUSED_OPS(WEFT_CHECK_OPCODE)
#undef WEFT_CHECK_OPCODE

// Cloned for AVX2 and AVX-512 (isa_clones.h), each opcode's loop inlined into each clone: every
// CPU gives the unfused kernels' bits.
template <class T>
WEFT_ISA_CLONES void run_instr(int32_t op, T* d, const T* a, const T* b, int64_t n) {
  switch (op) {
#define WEFT_RUN_OPCODE(OP, ARITY, EXPENSIVE) \
  case fused::k##OP: return apply_block<OP##Op>(d, a, b, n);
    WEFT_FUSED_OPS(WEFT_RUN_OPCODE)
#undef WEFT_RUN_OPCODE
    default: return;  // unreachable: decode_program checked every opcode
  }
}

// Copies input elements [s, s + len) of the output's flat index space out of a broadcast input.
template <class T>
void gather(const BroadcastPlan<1>& p, const T* src, int64_t s, int64_t len, T* dst, int64_t* idx) {
  const int64_t nd = static_cast<int64_t>(p.dims.size());
  const std::vector<int64_t>& dims = p.dims;
  const std::vector<int64_t>& st = p.strides[0];
  int64_t off = 0, rem = s;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % dims[d];
    rem /= dims[d];
    off += idx[d] * st[d];
  }
  const int64_t inner = dims[nd - 1], is = st[nd - 1];
  while (len > 0) {
    const int64_t run = std::min(len, inner - idx[nd - 1]);
    if (is) std::memcpy(dst, src + off, static_cast<size_t>(run) * sizeof(T));
    else std::fill(dst, dst + run, src[off]);
    dst += run;
    len -= run;
    if (len == 0) return;
    off -= idx[nd - 1] * is;  // back to the row's start, then one row on
    idx[nd - 1] = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < dims[d]) break;
      off -= st[d] * dims[d];
      idx[d] = 0;
    }
  }
}

// Writes a staged block out; streaming skips the read-for-ownership of outputs too big for cache.
template <class T>
void write_out(T* out, const T* stage, int64_t len, bool streaming) {
  size_t bytes = static_cast<size_t>(len) * sizeof(T);
  if (streaming && reinterpret_cast<uintptr_t>(out) % 32 == 0 && reinterpret_cast<uintptr_t>(stage) % 32 == 0) {
    const size_t streamed = bytes & ~size_t{31};
    stream_copy_avx(out, stage, streamed);
    std::memcpy(reinterpret_cast<char*>(out) + streamed, reinterpret_cast<const char*>(stage) + streamed,
                bytes - streamed);
  } else {
    std::memcpy(out, stage, bytes);
  }
}

enum class Kind : uint8_t { kFull, kScalar, kGeneral };

template <class T>
void fused_elementwise_kernel(KernelContext& ctx) {
  Tensor& out_t = ctx.output(0);
  const int64_t n = out_t.size();
  if (n == 0) return;
  const int num_inputs = static_cast<int>(ctx.inputs.size());
  fused::NodeProgram decoded;  // unless the caller prepared it
  const fused::NodeProgram& prog = fused::node_program(ctx, decoded);

  // Inputs: read in place (the output's shape), expanded once per task (one element) or gathered
  // per block (anything else). Broadcast inputs and temporaries share the scratch area.
  const T* data[fused::kMaxRegisters];
  Kind kind[fused::kMaxRegisters];
  int buffered = 0;
  bool general = false;
  for (int i = 0; i < num_inputs; ++i) {
    const Tensor& in = ctx.input(i);
    data[i] = static_cast<const T*>(raw_data(in));
    const int64_t size = in.size();
    kind[i] = size == n ? Kind::kFull : size == 1 ? Kind::kScalar : Kind::kGeneral;
    if (kind[i] == Kind::kGeneral) general = true;
    if (kind[i] != Kind::kFull) ++buffered;
  }
  if (general) {
    // Gathering trusts the shapes: check that each input broadcasts to the output.
    for (int i = 0; i < num_inputs; ++i) {
      const Shape& s = ctx.input(i).shape();
      bool fits = s.rank() <= out_t.shape().rank();
      for (int64_t d = 0; fits && d < s.rank(); ++d) {
        const int64_t od = out_t.shape()[out_t.shape().rank() - s.rank() + d];
        fits = s[d] == od || s[d] == 1;
      }
      if (!fits) ctx.fail("input " + std::to_string(i) + " of shape " + s.to_string() +
                          " does not broadcast to the output shape " + out_t.shape().to_string());
    }
  }
  std::vector<BroadcastPlan<1>> plans;
  if (general) {
    plans.reserve(static_cast<size_t>(num_inputs));
    for (int i = 0; i < num_inputs; ++i) plans.emplace_back(out_t.shape(), std::array<const Shape*, 1>{&ctx.input(i).shape()});
  }

  const int64_t slots = buffered + (prog.num_registers - num_inputs);
  int64_t block = static_cast<int64_t>(kScratchBytes / sizeof(T)) / std::max<int64_t>(slots, 1);
  block = std::min(kMaxBlock, block / kMinBlock * kMinBlock);
  if (block < kMinBlock) block = kMinBlock;  // only with > 250 registers of float64; scratch bound below
  if (block > n) block = n;
  const int64_t blocks = (n + block - 1) / block;
  bool expensive = false;
  for (int i = 0; i < prog.count; ++i) expensive |= fused::kOpcodes[prog.code[i].op].expensive;
  const int64_t grain = std::max<int64_t>(1, (expensive ? kExpensiveGrain : kCheapGrain) / block);
  T* out = static_cast<T*>(raw_data(out_t));
  const bool streaming = use_streaming<T>(n);

  ctx.pool().parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    alignas(64) T scratch[kScratchBytes / sizeof(T)];
    // Registers past the scratch bound (a program of hundreds of registers) spill to the heap.
    std::vector<T> spill;
    T* area = scratch;
    if (static_cast<size_t>(slots * block) > kScratchBytes / sizeof(T)) {
      spill.resize(static_cast<size_t>(slots * block));
      area = spill.data();
    }
    const T* reg[fused::kMaxRegisters];
    T* buf[fused::kMaxRegisters];
    int64_t slot = 0;
    for (int i = 0; i < num_inputs; ++i) {
      if (kind[i] == Kind::kFull) continue;
      buf[i] = area + block * slot++;
      reg[i] = buf[i];
      if (kind[i] == Kind::kScalar) std::fill(buf[i], buf[i] + block, data[i][0]);
    }
    for (int64_t r = num_inputs; r < prog.num_registers; ++r) {
      buf[r] = area + block * slot++;
      reg[r] = buf[r];
    }
    std::vector<int64_t> idx(general ? out_t.shape().rank() + 1 : 0);
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t s = blk * block;
      const int64_t len = std::min(block, n - s);
      for (int i = 0; i < num_inputs; ++i) {
        if (kind[i] == Kind::kFull) reg[i] = data[i] + s;
        else if (kind[i] == Kind::kGeneral) gather(plans[static_cast<size_t>(i)], data[i], s, len, buf[i], idx.data());
      }
      for (int k = 0; k < prog.count; ++k) {
        const Instr& in = prog.code[k];
        run_instr<T>(in.op, buf[in.dst], reg[in.a], in.b >= 0 ? reg[in.b] : nullptr, len);
      }
      write_out(out + s, reg[prog.output], len, streaming);
    }
#if defined(__x86_64__)
    if (streaming) _mm_sfence();
#endif
  });
}

// ---- FusedMatMul ----

template <class T>
void fused_matmul_kernel(KernelContext& ctx) {
  const Tensor& a_t = ctx.input(0);
  const Tensor& b_t = ctx.input(1);
  const bool ta = ctx.attrs.get_or<bool>("transpose_a", false);
  const bool tb = ctx.attrs.get_or<bool>("transpose_b", false);
  const Act act = parse_activation(ctx);
  const Shape& a_shape = a_t.shape();
  const Shape& out = ctx.output(0).shape();
  const int64_t n = out[out.rank() - 1];
  const int64_t m = n > 0 ? out.num_elements() / n : 0;  // every leading dim of A, as rows
  const int64_t k = ta ? a_shape[0] : a_shape[a_shape.rank() - 1];
  const int64_t lda = a_shape[a_shape.rank() - 1], ldb = b_t.shape()[1];
  if (act == Act::kReluGrad ? ctx.input(2).shape() != out : ctx.input(2).size() != n)
    ctx.fail(act == Act::kReluGrad ? "relu_grad's x has shape " + ctx.input(2).shape().to_string() +
                                         "; the output has shape " + out.to_string()
                                   : "bias has " + std::to_string(ctx.input(2).size()) + " elements; the output has " +
                                         std::to_string(n) + " columns");
  const T* a = static_cast<const T*>(raw_data(a_t));
  const T* b = static_cast<const T*>(raw_data(b_t));
  const T* operand = static_cast<const T*>(raw_data(ctx.input(2)));  // the bias, or relu_grad's x
  T* c = static_cast<T*>(raw_data(ctx.output(0)));
  if (m == 0 || n == 0) return;

  const GemmArgs g{m, n, k, ta, tb, lda, ldb, n};
  ThreadPool& pool = ctx.pool();
  const bool cheap = act == Act::kNone || act == Act::kRelu || act == Act::kReluGrad;
  const int64_t row_grain = std::max<int64_t>(1, (cheap ? kCheapGrain : kExpensiveGrain) / n);
  auto epilogue = [&](int64_t r0, int64_t r1) { epilogue_rows(c, operand, r0, r1, n, act); };
  if (k == 0) {
    std::fill(c, c + m * n, T(0));
    pool.parallel_for(m, row_grain, epilogue);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (use_own_sgemm(g)) {
      // Bias and relu, or the ReluGrad mask, are applied to each tile in registers; other
      // activations in a second pass.
      SgemmEpilogue in_registers;
      if (act == Act::kReluGrad) in_registers.relu_grad_of = operand;
      else if (cheap) in_registers = {operand, act == Act::kRelu};
      sgemm(pool, g, a, b, c, in_registers);
      if (!cheap) pool.parallel_for(m, row_grain, epilogue);
      return;
    }
  }
  gemm_rows<T>(pool, g, a, b, c, epilogue);
}

}  // namespace

void register_fused_kernels() {
  register_kernel("FusedElementwise", DeviceType::CPU, float32, fused_elementwise_kernel<float>);
  register_kernel("FusedElementwise", DeviceType::CPU, float64, fused_elementwise_kernel<double>);
  register_kernel("FusedMatMul", DeviceType::CPU, float32, fused_matmul_kernel<float>);
  register_kernel("FusedMatMul", DeviceType::CPU, float64, fused_matmul_kernel<double>);
  // 16-bit FusedMatMul as MatMul's (linalg.cpp). FusedElementwise stays float32/float64: the
  // fusion pass fuses only those, and its CUDA kernel has no 16-bit variant.
  register_via_float32("FusedMatMul");
}

}  // namespace weft::cpu
