// vector_math.h's functions on 16 lanes of AVX-512 (F only).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/vector_math_variants.h"

// Everything below is compiled for AVX-512; the standard headers above are not (see _avx2.cpp).
// Clang ignores GCC's target pragma (the fuzz build, scripts/fuzz, is clang's): the same through
// its attribute pragma.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
// GCC 12's own _mm512_slli_epi32 starts from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {

namespace {

struct Avx512 {
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }  // NaN or equal: b, as MINPS
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F abs(F a) { return from_bits(_mm512_and_si512(bits(a), _mm512_set1_epi32(0x7fffffff))); }
  static F with_sign_of(F m, F s) {
    const I sign = _mm512_and_si512(bits(s), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    return from_bits(_mm512_or_si512(bits(m), sign));
  }
  static I bits(F a) { return _mm512_castps_si512(a); }
  static F from_bits(I a) { return _mm512_castsi512_ps(a); }
  static I iset(int v) { return _mm512_set1_epi32(v); }
  static I iadd(I a, I b) { return _mm512_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int K>
  static I sll(I a) { return _mm512_slli_epi32(a, K); }
  template <int K>
  static I sra(I a) { return _mm512_srai_epi32(a, K); }
  static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M ge(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static M eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M is_nan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static M mor(M a, M b) { return static_cast<M>(a | b); }
  static F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
};

#include "kernels/cpu/vector_math_impl.h"

}  // namespace

const VectorMathTable* vector_math_avx512() {
  using Fns = vmath_impl::Functions<Avx512>;
  static const VectorMathTable table{Fns::exp_array, Fns::log_array, Fns::tanh_array, Fns::sigmoid_array,
                                     Fns::erf_array, Fns::gelu_array};
  return &table;
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
