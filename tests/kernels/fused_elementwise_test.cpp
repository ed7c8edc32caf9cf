// FusedElementwise against plain reference loops and against the unfused kernels it replaces:
// every opcode, both dtypes, broadcasting, an output that aliases an input, and sizes from one
// element to past the parallel and streaming thresholds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/defs/fused.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

class PoolDevice final : public Device {
 public:
  explicit PoolDevice(int threads)
      : Device("/job:localhost/replica:0/task:0/device:CPU:0", DeviceType::CPU, 0), pool_(threads) {}
  std::string description() const override { return "test pool"; }
  Allocator& allocator() override { return cpu_device()->allocator(); }
  ThreadPool& pool() override { return pool_; }
  void copy_to_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  ThreadPool pool_;
};

PoolDevice& pool4() {
  static PoolDevice d(4);
  return d;
}

const OpDef& def(const std::string& name) {
  register_builtin_ops();
  return op_registry().get(name);
}

// Infers the output, allocates it (unless given) and runs the op's CPU kernel.
Tensor run(const std::string& name, std::vector<Tensor> ins, const Attrs& attrs, Tensor out = {}) {
  const OpDef& op = def(name);
  InferContext ic(op, ins, attrs);
  op.infer(ic);
  std::vector<Tensor> outs{out.defined() ? out : Tensor::empty(ic.output(0).dtype, ic.output(0).shape)};
  KernelContext kc{op, ins, outs, attrs, pool4()};
  KernelFn fn = op.kernel(DeviceType::CPU, ins[0].dtype());
  if (!fn) throw NotFound("no CPU kernel for " + name);
  fn(kc);
  return outs[0];
}

Attrs program(std::vector<int64_t> code, int64_t num_registers, int64_t output) {
  return {{"program", std::move(code)}, {"num_registers", num_registers}, {"output", output}};
}

template <class T>
Tensor random_tensor(const Shape& shape, uint32_t seed, double lo = -3, double hi = 3) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(shape.num_elements()));
  for (T& e : v) e = static_cast<T>(d(gen));
  if (v.size() > 4) v[1] = T(0);  // the edge of relu, sign, abs
  return Tensor::from_host(dtype_v<T>, shape, v.data());
}

// Bitwise equality, any NaN equal to any NaN.
template <class T>
void expect_same(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
        << what << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

// Within `rel` of the reference, for the float32 transcendental functions (vector_math.h's, a few
// ulps from libm's); NaN where the reference is NaN.
template <class T>
void expect_near(const std::vector<T>& got, const std::vector<T>& want, double rel, const std::string& what,
                 double scale_floor = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(got[i], want[i], rel * std::max<double>(std::abs(want[i]), scale_floor) + 1e-30) << what << " at " << i;
  }
}
// Bit-exact for float64 and for exact operations; a few ulps for float32 transcendentals.
template <class T>
double tolerance(bool transcendental) {
  return std::is_same_v<T, float> && transcendental ? 4e-7 : 0.0;
}

// Plain scalar definitions of each opcode, for the reference loops. A switch over every opcode
// without a default, so that an opcode added to fused.h without its reference here is a compiler
// warning (-Wswitch), and a test failure naming it.
template <class T>
T reference(int op, T x, T y) {
  switch (static_cast<fused::Opcode>(op)) {
    case fused::kNeg: return -x;
    case fused::kAbs: return std::abs(x);
    case fused::kSign: return std::isnan(x) ? x : (x > 0 ? T(1) : x < 0 ? T(-1) : T(0));
    case fused::kSquare: return x * x;
    case fused::kExp: return std::exp(x);
    case fused::kLog: return std::log(x);
    case fused::kSqrt: return std::sqrt(x);
    case fused::kRsqrt: return T(1) / std::sqrt(x);
    case fused::kRelu: return x < 0 ? T(0) : x;
    case fused::kSigmoid: return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
    case fused::kTanh: return std::tanh(x);
    case fused::kAdd: return x + y;
    case fused::kSub: return x - y;
    case fused::kMul: return x * y;
    case fused::kDiv: return x / y;
    case fused::kMaximum: return std::isnan(x) || x > y ? x : y;
    case fused::kMinimum: return std::isnan(x) || x < y ? x : y;
    case fused::kErf: return std::erf(x);
    case fused::kGelu: return (x * T(0.5)) * (std::erf(x * T(0.7071067811865476)) + T(1));
    case fused::kNumOpcodes: break;
  }
  ADD_FAILURE() << "no reference for opcode " << op << " (" << (op < fused::kNumOpcodes ? fused::kOpcodes[op].op : "?")
                << ")";
  return T(0);
}

// The opcode table (fused.h) names ops the kernels and the fusion pass can rely on: elementwise,
// of the opcode's arity, with float32 and float64 kernels wherever FusedElementwise has one.
TEST(FusedElementwise, EveryOpcodeIsAnElementwiseOpOfItsArity) {
  const OpDef& fused_op = def("FusedElementwise");
  for (int op = 0; op < fused::kNumOpcodes; ++op) {
    const auto& info = fused::kOpcodes[op];
    SCOPED_TRACE(info.op);
    EXPECT_EQ(fused::opcode_for(info.op), op);
    const OpDef* d = op_registry().find(info.op);
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(d->has(kElementwise));
    EXPECT_EQ(d->min_inputs, info.arity);
    EXPECT_EQ(d->max_inputs, info.arity);
    for (DeviceType device : {DeviceType::CPU, DeviceType::CUDA})
      for (DType t : {float32, float64})
        if (fused_op.kernel(device, t)) {
          EXPECT_NE(d->kernel(device, t), nullptr) << dtype_name(t);
        }
  }
  EXPECT_EQ(fused::opcode_for("FusedElementwise"), -1);
}

template <class T>
void check_every_opcode(int64_t n) {
  const Tensor x = random_tensor<T>({n}, 1), y = random_tensor<T>({n}, 2, 0.5, 4);
  const std::vector<T> xv = x.to_vector<T>(), yv = y.to_vector<T>();
  for (int op = 0; op < fused::kNumOpcodes; ++op) {
    const auto& info = fused::kOpcodes[op];
    const bool binary = info.arity == 2;
    Tensor got = binary ? run("FusedElementwise", {x, y}, program({op, 2, 0, 1}, 3, 2))
                        : run("FusedElementwise", {x}, program({op, 1, 0, -1}, 2, 1));
    Tensor unfused = binary ? run(info.op, {x, y}, {}) : run(info.op, {x}, {});
    const std::string what =
        std::string(info.op) + " " + std::string(dtype_name(dtype_v<T>)) + " n=" + std::to_string(n);
    expect_same(got.to_vector<T>(), unfused.to_vector<T>(), what + " vs its kernel");
    std::vector<T> want(static_cast<size_t>(n));
    for (size_t i = 0; i < want.size(); ++i) want[i] = reference<T>(op, xv[i], binary ? yv[i] : T(0));
    // gelu's 1 + erf cancels for x < 0: its error is relative to |x| / 2, not to the result.
    if (tolerance<T>(info.expensive) > 0)
      expect_near(got.to_vector<T>(), want, tolerance<T>(true), what + " vs reference", op == fused::kGelu ? 2.0 : 0.0);
    else expect_same(got.to_vector<T>(), want, what + " vs reference");
  }
}

TEST(FusedElementwise, EveryOpcodeMatchesItsKernelFloat32) {
  for (int64_t n : {1, 3, 1000}) check_every_opcode<float>(n);
}

TEST(FusedElementwise, EveryOpcodeMatchesItsKernelFloat64) {
  for (int64_t n : {1, 7, 1000}) check_every_opcode<double>(n);
}

TEST(FusedElementwise, NanPropagatesThroughMaximumAndRelu) {
  const float nan = std::nanf("");
  const float xs[] = {nan, 1.f, -2.f}, ys[] = {0.f, nan, 3.f};
  Tensor x = Tensor::from_host(float32, {3}, xs), y = Tensor::from_host(float32, {3}, ys);
  // relu(maximum(x, y)): NaN from the left operand survives, from the right it does not (as unfused).
  Tensor got = run("FusedElementwise", {x, y}, program({fused::kMaximum, 2, 0, 1, fused::kRelu, 3, 2, -1}, 4, 3));
  Tensor unfused = run("Relu", {run("Maximum", {x, y}, {})}, {});
  expect_same(got.to_vector<float>(), unfused.to_vector<float>(), "relu(maximum)");
  EXPECT_TRUE(std::isnan(got.to_vector<float>()[0]));
}

// sigmoid(a * b + c) - tanh(a) / 2, with registers reused, against the chain of kernels.
template <class T>
void check_chain(int64_t n) {
  const Tensor a = random_tensor<T>({n}, 3), b = random_tensor<T>({n}, 4), c = random_tensor<T>({n}, 5);
  const T two_v = 2;
  const Tensor two = Tensor::from_host(dtype_v<T>, {}, &two_v);
  // registers: 0 a, 1 b, 2 c, 3 two; temporaries 4, 5
  std::vector<int64_t> code{fused::kMul, 4, 0, 1,  fused::kAdd, 5, 4, 2,  fused::kSigmoid, 4, 5, -1,
                            fused::kTanh, 5, 0, -1, fused::kDiv, 6, 5, 3, fused::kSub, 5, 4, 6};
  Tensor got = run("FusedElementwise", {a, b, c, two}, program(code, 7, 5));
  Tensor s = run("Sigmoid", {run("Add", {run("Mul", {a, b}, {}), c}, {})}, {});
  Tensor unfused = run("Sub", {s, run("Div", {run("Tanh", {a}, {}), two}, {})}, {});
  expect_same(got.to_vector<T>(), unfused.to_vector<T>(), "chain n=" + std::to_string(n));
  std::vector<T> av = a.to_vector<T>(), bv = b.to_vector<T>(), cv = c.to_vector<T>(), want(av.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = reference<T>(fused::kSigmoid, av[i] * bv[i] + cv[i], T(0)) - std::tanh(av[i]) / two_v;
  if (tolerance<T>(true) > 0) expect_near(got.to_vector<T>(), want, 1e-6, "chain vs reference n=" + std::to_string(n), 1.0);
  else expect_same(got.to_vector<T>(), want, "chain vs reference n=" + std::to_string(n));
}

TEST(FusedElementwise, ChainAcrossSizesAndThreads) {
  // 1 element, a partial block, exactly a block, several tasks, and past the streaming threshold.
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{1024}, int64_t{1025}, int64_t{100003},
                    (int64_t{1} << 21) + 5})
    check_chain<float>(n);
  for (int64_t n : {int64_t{5}, int64_t{70001}}) check_chain<double>(n);
}

// out = (x + y) * z with each operand of its own shape, against index arithmetic.
void check_broadcast(const Shape& xs, const Shape& ys, const Shape& zs, const Shape& out_shape) {
  const Tensor x = random_tensor<float>(xs, 6), y = random_tensor<float>(ys, 7), z = random_tensor<float>(zs, 8);
  Tensor got = run("FusedElementwise", {x, y, z}, program({fused::kAdd, 3, 0, 1, fused::kMul, 4, 3, 2}, 5, 4));
  ASSERT_EQ(got.shape(), out_shape);
  Tensor unfused = run("Mul", {run("Add", {x, y}, {}), z}, {});
  expect_same(got.to_vector<float>(), unfused.to_vector<float>(), "broadcast " + out_shape.to_string());
  // The reference: map every output index to each input's index.
  auto at = [&](const Tensor& t, const std::vector<float>& v, int64_t flat) {
    const Shape& s = t.shape();
    int64_t off = 0, stride = 1;
    for (int64_t d = out_shape.rank() - 1; d >= 0; --d) {
      const int64_t i = flat % out_shape[d];
      flat /= out_shape[d];
      const int64_t sd = d - (out_shape.rank() - s.rank());
      if (sd < 0) continue;
      if (s[sd] != 1) off += i * stride;
      stride *= s[sd];
    }
    return v[static_cast<size_t>(off)];
  };
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>(), zv = z.to_vector<float>();
  std::vector<float> want(static_cast<size_t>(out_shape.num_elements()));
  for (size_t i = 0; i < want.size(); ++i) {
    const auto f = static_cast<int64_t>(i);
    want[i] = (at(x, xv, f) + at(y, yv, f)) * at(z, zv, f);
  }
  expect_same(got.to_vector<float>(), want, "broadcast vs reference " + out_shape.to_string());
}

TEST(FusedElementwise, Broadcasting) {
  check_broadcast({5, 7}, {5, 7}, {}, {5, 7});                     // scalar
  check_broadcast({5, 7}, {7}, {1}, {5, 7});                       // bias row, size-1
  check_broadcast({5, 1}, {1, 7}, {5, 7}, {5, 7});                 // outer product
  check_broadcast({2, 1, 3}, {4, 1}, {3}, {2, 4, 3});              // ranks differ
  check_broadcast({300, 1}, {1, 1000}, {1000}, {300, 1000});       // many blocks, runs cut by blocks
  check_broadcast({3, 1, 700}, {1, 50, 1}, {}, {3, 50, 700});      // several tasks on the pool
  check_broadcast({1}, {1, 1}, {}, {1, 1});
}

TEST(FusedElementwise, OutputMayAliasAnInput) {
  // The executor hands a dead input over as the output: relu(a + b) written over a, then over b.
  for (int64_t n : {int64_t{3}, int64_t{5000}, (int64_t{1} << 21) + 3}) {
    for (int over : {0, 1}) {
      Tensor a = random_tensor<float>({n}, 9), b = random_tensor<float>({n}, 10);
      Tensor bias = random_tensor<float>({}, 11);
      Tensor want = run("Relu", {run("Add", {run("Add", {a, b}, {}), bias}, {})}, {});
      const Attrs attrs = program({fused::kAdd, 3, 0, 1, fused::kAdd, 4, 3, 2, fused::kRelu, 3, 4, -1}, 5, 3);
      Tensor target = over == 0 ? a : b;
      Tensor got = run("FusedElementwise", {a, b, bias}, attrs, target);
      EXPECT_EQ(raw_data(got), raw_data(target));
      expect_same(got.to_vector<float>(), want.to_vector<float>(), "aliased n=" + std::to_string(n));
    }
  }
}

TEST(FusedElementwise, EmptyOutput) {
  Tensor a = Tensor::empty(float32, {0, 3}), b = random_tensor<float>({3}, 12);
  Tensor got = run("FusedElementwise", {a, b}, program({fused::kAdd, 2, 0, 1}, 3, 2));
  EXPECT_EQ(got.shape(), (Shape{0, 3}));
}

void expect_rejected(std::vector<Tensor> ins, const Attrs& attrs, const std::string& fragment) {
  try {
    run("FusedElementwise", std::move(ins), attrs);
    FAIL() << "expected InvalidArgument containing '" << fragment << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[fused_elementwise]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(FusedElementwise, BadProgramsAndInputsAreRejected) {
  Tensor x = random_tensor<float>({4}, 13);
  expect_rejected({x}, program({99, 1, 0, -1}, 2, 1), "unknown opcode 99");
  expect_rejected({x}, program({fused::kRelu, 0, 0, -1}, 2, 1), "not a temporary");
  expect_rejected({x}, program({fused::kRelu, 1, 1, -1}, 2, 1), "read before it is written");
  expect_rejected({x}, program({fused::kAdd, 1, 0, 2}, 3, 1), "read before it is written");
  expect_rejected({x}, program({fused::kRelu, 1, 0, -1, fused::kNeg, 1, 1, -1}, 2, 1), "also a source");
  expect_rejected({x}, program({fused::kRelu, 1, 0, 0}, 2, 1), "src2 must be -1");
  expect_rejected({x}, program({fused::kRelu, 1, 0, -1}, 3, 2), "output register 2");
  expect_rejected({x}, program({fused::kRelu, 1, 0}, 2, 1), "multiple of 4");
  expect_rejected({x}, program({fused::kRelu, 1, 0, -1}, 1000, 1), "num_registers");
  int32_t iv[4] = {1, 2, 3, 4};
  expect_rejected({Tensor::from_host(int32, {4}, iv)}, program({fused::kRelu, 1, 0, -1}, 2, 1), "not supported");
  expect_rejected({x, random_tensor<double>({4}, 14)}, program({fused::kAdd, 2, 0, 1}, 3, 2), "dtypes differ");
  expect_rejected({x, random_tensor<float>({3}, 15)}, program({fused::kAdd, 2, 0, 1}, 3, 2), "not broadcastable");
}

}  // namespace
}  // namespace weft
