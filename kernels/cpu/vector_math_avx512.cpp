// vector_math.h's functions on 16 lanes of AVX-512 (F only).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/reduce_loops.h"
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
// GCC 12's own _mm512_slli_epi32 and _mm512_reduce_max_ps start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized and -Wuninitialized report once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

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
  static F fnmsub(F a, F b, F c) { return _mm512_fnmsub_ps(a, b, c); }  // -(a b) - c, rounded once
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
  static bool any(M m) { return m != 0; }
  static bool all_within(F a, float lo, float hi) {  // NaN is within nothing
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a, set(lo), _CMP_GE_OQ), a, set(hi), _CMP_LE_OQ) == 0xffff;
  }
  // The first `count` lanes (1 <= count <= 16) of p, the others `fill`; the others are not read.
  static F load_first(const float* p, long count, float fill) {
    return _mm512_mask_loadu_ps(set(fill), first(count), p);
  }
  static void store_first(float* p, F v, long count) { _mm512_mask_storeu_ps(p, first(count), v); }
  static F keep_first(F v, long count) { return _mm512_maskz_mov_ps(first(count), v); }  // the others 0
  static float max_lanes(F v) { return _mm512_reduce_max_ps(v); }
  // Lanes 0-3, 4-7, 8-11 and 12-15 added as (A0 + A1) + (A2 + A3), then its lanes as (0 + 1) + (2 + 3).
  static float sum16(const F* acc) {
    const __m128 a0 = _mm512_castps512_ps128(acc[0]), a1 = _mm512_extractf32x4_ps(acc[0], 1);
    const __m128 a2 = _mm512_extractf32x4_ps(acc[0], 2), a3 = _mm512_extractf32x4_ps(acc[0], 3);
    return fold4(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
  }
  static float fold4(__m128 t) {
    const __m128 pairs = _mm_add_ps(t, _mm_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));  // t0 + t1, ., t2 + t3, .
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehl_ps(pairs, pairs)));
  }
  static __mmask16 first(long count) { return static_cast<__mmask16>((1u << count) - 1); }
};

#include "kernels/cpu/vector_math_impl.h"

}  // namespace

const VectorMathTable* vector_math_avx512() {
  using Fns = vmath_impl::Functions<Avx512>;
  static const VectorMathTable table{Fns::exp_array, Fns::log_array, Fns::tanh_array, Fns::sigmoid_array,
                                     Fns::erf_array, Fns::gelu_array, Fns::softmax, Fns::log_softmax,
                                     Fns::max, Fns::exp_sum, Fns::log_exp_sum, Fns::scale, Fns::subtract};
  return &table;
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
