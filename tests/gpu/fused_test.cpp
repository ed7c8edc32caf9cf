// The CUDA FusedElementwise (kernels/cuda/fused.cu): a program must give exactly the bits of the
// separate CUDA ops run one after the other (both use the same scalar functors), and the CPU's
// FusedElementwise within the tolerance of the transcendental functions. The registration test
// also runs without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/defs/fused.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

struct Program {
  std::string name;
  std::vector<Shape> inputs;
  std::vector<int64_t> code;  // opcode, dst, a, b (b = -1 for unary ops)
  int64_t num_registers;
  int64_t output;
  Values values = Values::kGeneral;
};

Attrs fused_attrs(const Program& p) {
  return {{"program", p.code}, {"num_registers", p.num_registers}, {"output", p.output}};
}

Shape output_shape(const Program& p) {
  Shape out = p.inputs[0];
  for (const Shape& s : p.inputs) out = broadcast(out, s);
  return out;
}

// A chain through the opcodes over inputs a, b, c (registers 0..2), reusing dead registers (each
// opcode alone is in programs()).
std::vector<int64_t> every_opcode() {
  using namespace fused;
  return {kAdd,     3, 0, 1,  kSub,  4, 3, 2,  kMul,     5, 4, 0,  kDiv,     6, 5, 1,  kMaximum, 7, 6, 2,
          kMinimum, 3, 7, 0,  kNeg,  4, 3, -1, kAbs,     5, 4, -1, kSign,    6, 5, -1, kSquare,  7, 3, -1,
          kExp,     4, 6, -1, kLog,  5, 7, -1, kSqrt,    6, 5, -1, kRsqrt,   7, 5, -1, kRelu,    3, 4, -1,
          kSigmoid, 4, 7, -1, kTanh, 5, 3, -1, kAdd,     6, 4, 5,  kMul,     7, 6, 6};
}

std::vector<Program> programs() {
  using namespace fused;
  std::vector<Program> ps = {
      {"relu_add_same_shape", {Shape{1000}, Shape{1000}}, {kAdd, 2, 0, 1, kRelu, 3, 2, -1}, 4, 3},
      {"relu_add_scalar", {Shape{3, 4, 5}, Shape{}}, {kAdd, 2, 0, 1, kRelu, 3, 2, -1}, 4, 3},
      {"broadcast_rows_and_columns", {Shape{7, 1}, Shape{1, 5}, Shape{7, 5}},
       {kMul, 3, 0, 1, kSub, 4, 3, 2}, 5, 4},
      {"every_opcode", {Shape{513, 1025}, Shape{1025}, Shape{513, 1}}, every_opcode(), 8, 7},
      {"every_opcode_large", {Shape{(1 << 22) + 5}, Shape{1}, Shape{(1 << 22) + 5}}, every_opcode(), 8, 7},
      {"empty", {Shape{0, 3}, Shape{3}}, {kAdd, 2, 0, 1}, 3, 2},
      {"sigmoid_of_tanh_2d_broadcast", {Shape{2, 1, 3}, Shape{2, 4, 3}}, {kTanh, 2, 0, -1, kSigmoid, 3, 2, -1,
                                                                          kMaximum, 4, 3, 1}, 5, 4},
  };
  // Ten inputs: more than a kernel argument holds, so the program goes through a device table.
  Program many{"ten_inputs", {}, {}, 19, 18};
  for (int q = 0; q < 10; ++q) many.inputs.push_back(q % 2 ? Shape{5} : Shape{6, 5});
  many.code = {kAdd, 10, 0, 1};
  for (int64_t q = 2; q < 10; ++q) many.code.insert(many.code.end(), {q % 3 ? kAdd : kMul, 9 + q, 8 + q, q});
  ps.push_back(many);
  // 40 registers: the kernel's large register file; 38 instructions: the device table again.
  Program chain{"long_chain", {Shape{100, 10}, Shape{10}}, {}, 40, 39, Values::kSmallPower};
  chain.code = {kAdd, 2, 0, 1};
  for (int64_t r = 3; r < 40; ++r) {
    const int64_t op = r % 3 == 0 ? kMul : r % 3 == 1 ? kSub : kAdd;
    chain.code.insert(chain.code.end(), {op, r, r - 1, r % 2});
  }
  ps.push_back(chain);
  // Each opcode alone (the second operand broadcast), so an opcode added to fused.h is checked
  // here without a line of its own.
  for (int64_t op = 0; op < kNumOpcodes; ++op) {
    const int64_t arity = kOpcodes[op].arity;
    Program single{std::string("opcode_") + kOpcodes[op].op, {Shape{513, 1025}}, {op, arity, 0, arity == 2 ? 1 : -1},
                   arity + 1, arity};
    if (arity == 2) single.inputs.push_back(Shape{1025});
    ps.push_back(single);
  }
  return ps;
}

// The program run as separate ops on `device`, one kernel per instruction.
Tensor run_unfused(Device& device, const Program& p, const std::vector<Tensor>& ins, DType dt) {
  std::vector<Tensor> reg(static_cast<size_t>(p.num_registers));
  for (size_t q = 0; q < ins.size(); ++q) reg[q] = ins[q];
  for (size_t k = 0; k + 3 < p.code.size(); k += 4) {
    const auto& info = fused::kOpcodes[p.code[k]];
    const Tensor& a = reg[p.code[k + 2]];
    if (info.arity == 1) {
      reg[p.code[k + 1]] = run_on(device, info.op, {a}, dt, a.shape());
    } else {
      const Tensor& b = reg[p.code[k + 3]];
      reg[p.code[k + 1]] = run_on(device, info.op, {a, b}, dt, broadcast(a.shape(), b.shape()));
    }
  }
  return reg[p.output];
}

// CUDA's float exp/log/tanh are within a few ulp of glibc's; through a chain of up to 19 ops the
// differences can grow (each op at most doubles a relative error it is handed, except near
// cancellation, which the every-opcode program avoids only statistically), so the CPU comparison
// uses a loose bound; the separate-op comparison is exact.
constexpr double kCpuTolerance = 1.0 / (1 << 12);

TEST(CudaFused, MatchesTheSeparateCudaOpsBitForBitAndTheCpuClosely) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (DType dt : {float32, float64}) {
    for (const Program& p : programs()) {
      std::vector<Tensor> ins;
      for (const Shape& s : p.inputs) ins.push_back(random_tensor(dt, s, seed++, p.values));
      const Shape out = output_shape(p);
      const std::string what = p.name + " " + std::string(dtype_name(dt));
      Tensor got = run_on(*gpu(), "FusedElementwise", ins, dt, out, fused_attrs(p));
      Tensor separate = run_unfused(*gpu(), p, ins, dt);
      ASSERT_TRUE(same_values(separate, got, 0)) << what << " vs the separate CUDA ops";
      Tensor cpu = run_on(*cpu_device(), "FusedElementwise", ins, dt, out, fused_attrs(p));
      // Exact programs (no transcendental opcode) match the CPU bit for bit.
      bool exact = true;
      for (size_t k = 0; k < p.code.size(); k += 4) exact = exact && !fused::kOpcodes[p.code[k]].expensive;
      ASSERT_TRUE(same_values(cpu, got, exact ? 0 : kCpuTolerance)) << what << " vs the CPU";
    }
  }
}

// The output may take the buffer of an input of its shape (the op is kElementwise).
TEST(CudaFused, OutputMayAliasAnInput) {
  WEFT_REQUIRE_GPU();
  const Program p{"alias", {Shape{300, 70}, Shape{70}}, {fused::kSub, 2, 0, 1, fused::kRelu, 3, 2, -1}, 4, 3};
  std::vector<Tensor> host{random_tensor(float32, p.inputs[0], 3, Values::kGeneral),
                           random_tensor(float32, p.inputs[1], 4, Values::kGeneral)};
  Tensor want = run_on(*gpu(), "FusedElementwise", host, float32, p.inputs[0], fused_attrs(p));
  const OpDef* op = op_registry().find("FusedElementwise");
  std::vector<Tensor> ins{host[0].to(gpu()), host[1].to(gpu())};
  const void* buffer = raw_data(ins[0]);
  std::vector<Tensor> outs(1);
  run_kernel(*op, find_kernel(*op, DeviceType::CUDA, float32), *gpu(), fused_attrs(p), ins, outs,
             [&](size_t) { return TensorMeta{float32, p.inputs[0]}; }, nullptr, /*reuse_input=*/0);
  ins.clear();
  EXPECT_EQ(raw_data(outs[0]), buffer);
  EXPECT_TRUE(same_values(want, outs[0].to(cpu_device()), 0));
}

TEST(CudaFused, BadProgramsAndShapesFail) {
  WEFT_REQUIRE_GPU();
  Tensor a = random_tensor(float32, Shape{3, 4}, 1, Values::kGeneral);
  Tensor b = random_tensor(float32, Shape{5}, 2, Values::kGeneral);
  // Reads register 3 before anything wrote it.
  const Program bad{"bad", {Shape{3, 4}, Shape{3, 4}}, {fused::kAdd, 2, 0, 3, fused::kRelu, 3, 2, -1}, 4, 3};
  EXPECT_THROW(run_on(*gpu(), "FusedElementwise", {a, a}, float32, Shape{3, 4}, fused_attrs(bad)), InvalidArgument);
  const Program add{"add", {Shape{3, 4}, Shape{5}}, {fused::kAdd, 2, 0, 1}, 3, 2};
  try {
    run_on(*gpu(), "FusedElementwise", {a, b}, float32, Shape{3, 4}, fused_attrs(add));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 of shape (5,) does not broadcast to the output shape (3, 4)"),
              std::string::npos)
        << e.what();
  }
}

// Runs without a GPU: the CPU's dtypes, no more.
TEST(CudaFusedKernels, RegisteredForTheCpuDtypes) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  const OpDef* op = op_registry().find("FusedElementwise");
  ASSERT_NE(op, nullptr);
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    EXPECT_EQ(has_kernel(*op, DeviceType::CUDA, dt), has_kernel(*op, DeviceType::CPU, dt)) << dtype_name(dt);
  }
  EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, float32));
  EXPECT_TRUE(has_kernel(*op, DeviceType::CUDA, float64));
}

}  // namespace
}  // namespace weft::gpu_test
