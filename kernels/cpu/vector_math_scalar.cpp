// vector_math.h's functions one lane at a time, for CPUs without AVX2 and FMA: the same
// operations as the vector variants (std::fma rounds once, as their FMA instructions do), so the
// same bits.
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/vector_math_variants.h"

namespace weft::cpu {

namespace {

struct Scalar {
  using F = float;
  using I = int32_t;
  using M = bool;
  static constexpr int kLanes = 1;
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F set(float v) { return v; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
  static F fnmsub(F a, F b, F c) { return std::fma(-a, b, -c); }  // -(a b) - c, rounded once
  static F min(F a, F b) { return a < b ? a : b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static F abs(F a) { return std::bit_cast<F>(std::bit_cast<uint32_t>(a) & 0x7fffffffu); }
  static F with_sign_of(F m, F s) {
    return std::bit_cast<F>(std::bit_cast<uint32_t>(m) | (std::bit_cast<uint32_t>(s) & 0x80000000u));
  }
  static I bits(F a) { return std::bit_cast<I>(a); }
  static F from_bits(I a) { return std::bit_cast<F>(a); }
  static I iset(int v) { return v; }
  static I iadd(I a, I b) { return static_cast<I>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
  static I isub(I a, I b) { return static_cast<I>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b)); }
  template <int K>
  static I sll(I a) { return static_cast<I>(static_cast<uint32_t>(a) << K); }
  template <int K>
  static I sra(I a) { return a >> K; }  // arithmetic in C++20
  static F to_float(I a) { return static_cast<F>(a); }
  static M lt(F a, F b) { return a < b; }
  static M ge(F a, F b) { return a >= b; }
  static M eq(F a, F b) { return a == b; }
  static M is_nan(F a) { return a != a; }
  static M mor(M a, M b) { return a || b; }
  static F select(M m, F a, F b) { return m ? a : b; }
  static bool any(M m) { return m; }
  static bool all_within(F a, float lo, float hi) { return lo <= a && a <= hi; }  // NaN is within nothing
  static F load_first(const float* p, long, float) { return *p; }  // count is 1
  static void store_first(float* p, F v, long) { *p = v; }
  static F keep_first(F v, long) { return v; }
  static float max_lanes(F v) { return v; }
  static float sum16(const F* a) {
    float t[4];
    for (int l = 0; l < 4; ++l) t[l] = (a[l] + a[l + 4]) + (a[l + 8] + a[l + 12]);
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
};

#include "kernels/cpu/vector_math_impl.h"

}  // namespace

const VectorMathTable* vector_math_scalar() {
  using Fns = vmath_impl::Functions<Scalar>;
  static const VectorMathTable table{Fns::exp_array, Fns::log_array, Fns::tanh_array, Fns::sigmoid_array,
                                     Fns::erf_array, Fns::gelu_array, Fns::softmax, Fns::log_softmax,
                                     Fns::max, Fns::exp_sum, Fns::log_exp_sum, Fns::scale, Fns::subtract};
  return &table;
}

}  // namespace weft::cpu
