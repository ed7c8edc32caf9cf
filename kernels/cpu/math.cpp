// CPU kernels for arithmetic and comparisons.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"

namespace weft::cpu {

namespace {

template <class T>
T floor_div(KernelContext& ctx, T a, T b) {
  if (b == 0) ctx.fail("integer division by zero");
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));  // no overflow trap
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}

template <class T>
T int_pow(KernelContext& ctx, T base, T exp) {
  if (exp < 0) ctx.fail("integers to negative integer powers are not allowed");
  T result = 1;
  using U = std::make_unsigned_t<T>;  // wrap around on overflow, like NumPy, without UB
  U r = 1, b = static_cast<U>(base);
  for (T e = exp; e > 0; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  result = static_cast<T>(r);
  return result;
}

// Integer arithmetic wraps around on overflow (as in TensorFlow and NumPy) instead of being UB.
template <class T, bool = std::is_integral_v<T>>
struct WrapType { using type = T; };
template <class T>
struct WrapType<T, true> { using type = std::make_unsigned_t<T>; };
template <class T>
using Wide = typename WrapType<T>::type;

template <class T>
void add_k(KernelContext& c) {
  binary_loop<T, T>(c, [](T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); });
}
template <class T>
void sub_k(KernelContext& c) {
  binary_loop<T, T>(c, [](T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b)); });
}
template <class T>
void mul_k(KernelContext& c) {
  binary_loop<T, T>(c, [](T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b)); });
}
template <class T>
void div_k(KernelContext& c) {
  if constexpr (std::is_floating_point_v<T>) {
    binary_loop<T, T>(c, [](T a, T b) { return a / b; });
  } else {
    // Integer division floors, like Python's // and tf.math.floordiv; a zero divisor is an error.
    binary_loop<T, T>(c, [&c](T a, T b) { return floor_div(c, a, b); });
  }
}
template <class T>
void maximum_k(KernelContext& c) {
  // NaN propagates, as in NumPy and TensorFlow.
  binary_loop<T, T>(c, [](T a, T b) { return (a > b || a != a) ? a : b; });
}
template <class T>
void minimum_k(KernelContext& c) {
  binary_loop<T, T>(c, [](T a, T b) { return (a < b || a != a) ? a : b; });
}
template <class T>
void pow_k(KernelContext& c) {
  if constexpr (std::is_floating_point_v<T>) {
    binary_loop<T, T>(c, [](T a, T b) { return std::pow(a, b); }, kExpensiveGrain);
  } else {
    binary_loop<T, T>(c, [&c](T a, T b) { return int_pow(c, a, b); });
  }
}

template <class T>
void equal_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a == b; }); }
template <class T>
void not_equal_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a != b; }); }
template <class T>
void less_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a < b; }); }
template <class T>
void less_equal_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a <= b; }); }
template <class T>
void greater_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a > b; }); }
template <class T>
void greater_equal_k(KernelContext& c) { binary_loop<T, bool>(c, [](T a, T b) { return a >= b; }); }

template <class T>
void neg_k(KernelContext& c) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    unary_loop<T, T>(c, [](T x) { return static_cast<T>(U(0) - static_cast<U>(x)); });
  } else {
    unary_loop<T, T>(c, [](T x) { return -x; });
  }
}
template <class T>
void abs_k(KernelContext& c) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    unary_loop<T, T>(c, [](T x) { return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x; });
  } else {
    unary_loop<T, T>(c, [](T x) { return std::abs(x); });
  }
}
template <class T>
void sign_k(KernelContext& c) {
  unary_loop<T, T>(c, [](T x) { return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0))); });
}
template <class T>
void square_k(KernelContext& c) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    unary_loop<T, T>(c, [](T x) { return static_cast<T>(static_cast<U>(x) * static_cast<U>(x)); });
  } else {
    unary_loop<T, T>(c, [](T x) { return x * x; });
  }
}
template <class T>
void exp_k(KernelContext& c) { unary_math_loop<T>(c, UnaryMath::kExp); }
template <class T>
void log_k(KernelContext& c) { unary_math_loop<T>(c, UnaryMath::kLog); }
template <class T>
void erf_k(KernelContext& c) { unary_math_loop<T>(c, UnaryMath::kErf); }
template <class T>
void sqrt_k(KernelContext& c) { unary_loop<T, T>(c, [](T x) { return std::sqrt(x); }); }
template <class T>
void rsqrt_k(KernelContext& c) { unary_loop<T, T>(c, [](T x) { return T(1) / std::sqrt(x); }); }

template <class T>
void select_k(KernelContext& c) {
  const Tensor& cond = c.input(0);
  const Tensor& a = c.input(1);
  const Tensor& b = c.input(2);
  Tensor& out = c.output(0);
  const bool* pc = static_cast<const bool*>(cond.raw_data());
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  BroadcastPlan<3> plan(out.shape(), {&cond.shape(), &a.shape(), &b.shape()});
  const int64_t len = plan.inner;
  const auto s = plan.inner_stride;
  c.pool().parallel_for(plan.outer, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(len, 1)),
                        [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](int64_t o, const std::array<int64_t, 3>& off) {
      for (int64_t j = 0; j < len; ++j)
        po[o + j] = pc[off[0] + j * s[0]] ? pa[off[1] + j * s[1]] : pb[off[2] + j * s[2]];
    });
  });
}

#define WEFT_REGISTER_NUMERIC(OP, FN)                            \
  register_kernel(OP, DeviceType::CPU, float32, FN<float>);      \
  register_kernel(OP, DeviceType::CPU, float64, FN<double>);     \
  register_kernel(OP, DeviceType::CPU, int32, FN<int32_t>);      \
  register_kernel(OP, DeviceType::CPU, int64, FN<int64_t>)
#define WEFT_REGISTER_FLOAT(OP, FN)                          \
  register_kernel(OP, DeviceType::CPU, float32, FN<float>);  \
  register_kernel(OP, DeviceType::CPU, float64, FN<double>)

}  // namespace

void register_math_kernels() {
  WEFT_REGISTER_NUMERIC("Add", add_k);
  WEFT_REGISTER_NUMERIC("Sub", sub_k);
  WEFT_REGISTER_NUMERIC("Mul", mul_k);
  WEFT_REGISTER_NUMERIC("Div", div_k);
  WEFT_REGISTER_NUMERIC("Maximum", maximum_k);
  WEFT_REGISTER_NUMERIC("Minimum", minimum_k);
  WEFT_REGISTER_NUMERIC("Pow", pow_k);
  WEFT_REGISTER_NUMERIC("Neg", neg_k);
  WEFT_REGISTER_NUMERIC("Abs", abs_k);
  WEFT_REGISTER_NUMERIC("Sign", sign_k);
  WEFT_REGISTER_NUMERIC("Square", square_k);
  WEFT_REGISTER_FLOAT("Exp", exp_k);
  WEFT_REGISTER_FLOAT("Log", log_k);
  WEFT_REGISTER_FLOAT("Erf", erf_k);
  WEFT_REGISTER_FLOAT("Sqrt", sqrt_k);
  WEFT_REGISTER_FLOAT("Rsqrt", rsqrt_k);

  WEFT_REGISTER_NUMERIC("Equal", equal_k);
  WEFT_REGISTER_NUMERIC("NotEqual", not_equal_k);
  register_kernel("Equal", DeviceType::CPU, bool_, equal_k<bool>);
  register_kernel("NotEqual", DeviceType::CPU, bool_, not_equal_k<bool>);
  WEFT_REGISTER_NUMERIC("Less", less_k);
  WEFT_REGISTER_NUMERIC("LessEqual", less_equal_k);
  WEFT_REGISTER_NUMERIC("Greater", greater_k);
  WEFT_REGISTER_NUMERIC("GreaterEqual", greater_equal_k);

  WEFT_REGISTER_NUMERIC("Select", select_k);
  register_kernel("Select", DeviceType::CPU, bool_, select_k<bool>);

  // Every op above on float16 and bfloat16 too, through its float32 kernel.
  register_via_float32({"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Neg", "Abs", "Sign", "Square", "Exp",
                        "Log", "Erf", "Sqrt", "Rsqrt", "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
                        "Select"});
}

}  // namespace weft::cpu
