// The scalar functions of the CPU elementwise ops, one functor per op, and the two ways they run:
// as the op's own kernel over tensors (elementwise_kernel, registered by register_elementwise),
// and as one instruction of a FusedElementwise program over a block (apply_block, fused.cpp).
// One function per op is what makes a fused program give the separate kernels' bits.
//
// The exact ops (Neg, Sign, Square, Relu, Add, Sub, Mul, Maximum, Minimum, ReluGrad and the
// comparisons) are kernels/shared_elementwise_ops.h's, the functors the CUDA kernels call too.
// Here are the rest, the CPU's own: those calling libm (their CUDA twins, with the same semantics,
// are in kernels/cuda/elementwise_ops.cuh), and the integer Div and Pow, which fail the kernel on
// bad data. The transcendental ops (Exp, Log, Erf, Sigmoid, Tanh) have no scalar function: their
// functor names a vector_math.h function (kMath), which runs over a whole block, in the op's
// kernel and in a fused program alike.
//
//   register_numeric<AddOp>("Add");   // float32, float64, int32, int64; float16, bfloat16 via float32
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/shared_elementwise_ops.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

// ReluGradOp's x > 0 ? dy : +0, as a mask on dy's bits: the same bits, and no branch. In loops
// that do more per element than ReluGrad's own kernel (a batch norm's sums, max pooling's
// gradient) the select compiled to a branch, mispredicted on half of a network's values: 5x
// slower.
template <class T>
inline T relu_grad_masked(T dy, T x) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits b;
  std::memcpy(&b, &dy, sizeof b);
  b &= Bits{0} - static_cast<Bits>(x > T(0));
  T g;
  std::memcpy(&g, &b, sizeof g);
  return g;
}

// ---- unary ----

struct AbsOp {
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x < 0 ? NegOp{}(x) : x;
    else return std::abs(x);
  }
};
struct SqrtOp {
  template <class T>
  T operator()(T x) const { return std::sqrt(x); }
};
struct RsqrtOp {  // both correctly rounded, so every device and dtype agrees
  template <class T>
  T operator()(T x) const { return T(1) / std::sqrt(x); }
};
// libm's, one call per element: expensive enough to split over threads sooner.
struct SinOp {
  template <class T>
  static constexpr bool kExpensive = true;
  template <class T>
  T operator()(T x) const { return std::sin(x); }
};
struct CosOp {
  template <class T>
  static constexpr bool kExpensive = true;
  template <class T>
  T operator()(T x) const { return std::cos(x); }
};
struct ExpOp { static constexpr UnaryMath kMath = UnaryMath::kExp; };
struct LogOp { static constexpr UnaryMath kMath = UnaryMath::kLog; };
struct ErfOp { static constexpr UnaryMath kMath = UnaryMath::kErf; };
struct GeluOp { static constexpr UnaryMath kMath = UnaryMath::kGelu; };
struct SigmoidOp { static constexpr UnaryMath kMath = UnaryMath::kSigmoid; };
struct TanhOp { static constexpr UnaryMath kMath = UnaryMath::kTanh; };

// ---- binary arithmetic ----

// Integer division floors (floor_div); a zero divisor fails the kernel.
struct DivOp {
  const KernelContext* ctx = nullptr;  // integers only: where a zero divisor is reported
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      if (b == 0) ctx->fail("integer division by zero");
      return floor_div(a, b);
    }
  }
};
// Integer powers wrap (int_pow); a negative exponent fails the kernel.
struct PowOp {
  const KernelContext* ctx = nullptr;  // integers only: where a negative exponent is reported
  template <class T>
  static constexpr bool kExpensive = std::is_floating_point_v<T>;
  template <class T>
  T operator()(T base, T exp) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(base, exp);
    } else {
      if (exp < 0) ctx->fail("integers to negative integer powers are not allowed");
      return int_pow(base, exp);
    }
  }
};

// ---- running them ----

// A functor that names a vector_math.h function rather than computing one element.
template <class Op>
concept BlockMath = requires { Op::kMath; };

// Worth splitting over threads sooner (kExpensiveGrain): a transcendental function, or a functor
// that says so for T. FusedElementwise's opcode table says the same of each opcode (fused.cpp
// checks that it agrees).
template <class Op, class T>
constexpr bool expensive_v = [] {
  if constexpr (BlockMath<Op>) return true;
  else if constexpr (requires { Op::template kExpensive<T>; }) return Op::template kExpensive<T>;
  else return false;
}();

// The functor of a kernel, given the context where the integer Div and Pow report bad data.
template <class Op>
Op make_op(const KernelContext& c) {
  if constexpr (std::is_constructible_v<Op, const KernelContext*>) return Op{&c};
  else return Op{};
}

// The op's kernel on T: flat loops the compiler vectorises, broadcasting through BroadcastPlan
// (elementwise.h), over the pool; transcendental functions a block at a time.
template <class Op, class T>
void elementwise_kernel(KernelContext& c) {
  constexpr int64_t grain = expensive_v<Op, T> ? kExpensiveGrain : kCheapGrain;
  if constexpr (BlockMath<Op>) unary_math_loop<T>(c, Op::kMath);
  else if constexpr (std::is_invocable_v<const Op&, T>)
    unary_loop<T, std::invoke_result_t<const Op&, T>>(c, make_op<Op>(c), grain);
  else
    binary_loop<T, std::invoke_result_t<const Op&, T, T>>(c, make_op<Op>(c), grain);
}

// Registers Op's CPU kernel for each element type Ts, then float16 and bfloat16 through its
// float32 kernel (via_float32.h), so a new op needs one line for every dtype.
template <class Op, class... Ts>
void register_elementwise(const char* op) {
  (register_kernel(op, DeviceType::CPU, dtype_v<Ts>, elementwise_kernel<Op, Ts>), ...);
  register_via_float32(op);
}
template <class Op>
void register_float(const char* op) { register_elementwise<Op, float, double>(op); }
template <class Op>
void register_numeric(const char* op) { register_elementwise<Op, float, double, int32_t, int64_t>(op); }

// One instruction of a fused program over a block: d = op(a) or op(a, b). The arrays never
// overlap (fused.h), so the loops vectorise.
template <class Op, class T>
inline void apply_block(T* __restrict d, const T* __restrict a, const T* __restrict b, int64_t n) {
  const Op op{};
  if constexpr (BlockMath<Op>) {
    unary_math(Op::kMath, a, d, n);
  } else if constexpr (std::is_invocable_v<const Op&, T>) {
    for (int64_t j = 0; j < n; ++j) d[j] = op(a[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) d[j] = op(a[j], b[j]);
  }
}

}  // namespace weft::cpu
