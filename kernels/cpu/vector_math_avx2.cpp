// vector_math.h's functions on 8 lanes of AVX2 with FMA.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/vector_math_variants.h"

// Everything below is compiled for AVX2 and FMA; the standard headers above are not, so no
// function a baseline caller might share (an inline one of the library) gets the wider code.
// Clang ignores GCC's target pragma (the fuzz build, scripts/fuzz, is clang's): the same through
// its attribute pragma.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace weft::cpu {

namespace {

struct Avx2 {
  using F = __m256;
  using I = __m256i;
  using M = __m256;
  static constexpr int kLanes = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmsub(F a, F b, F c) { return _mm256_fnmsub_ps(a, b, c); }  // -(a b) - c, rounded once
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F abs(F a) { return _mm256_castsi256_ps(_mm256_and_si256(bits(a), _mm256_set1_epi32(0x7fffffff))); }
  static F with_sign_of(F m, F s) {
    const I sign = _mm256_and_si256(bits(s), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm256_castsi256_ps(_mm256_or_si256(bits(m), sign));
  }
  static I bits(F a) { return _mm256_castps_si256(a); }
  static F from_bits(I a) { return _mm256_castsi256_ps(a); }
  static I iset(int v) { return _mm256_set1_epi32(v); }
  static I iadd(I a, I b) { return _mm256_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int K>
  static I sll(I a) { return _mm256_slli_epi32(a, K); }
  template <int K>
  static I sra(I a) { return _mm256_srai_epi32(a, K); }
  static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M ge(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static M eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M is_nan(F a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static M mor(M a, M b) { return _mm256_or_ps(a, b); }
  static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  static bool all_within(F a, float lo, float hi) {  // NaN is within nothing
    return _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(a, set(lo), _CMP_GE_OQ), _mm256_cmp_ps(a, set(hi), _CMP_LE_OQ))) == 0xff;
  }
  // The first `count` lanes (1 <= count <= 8) of p, the others `fill`; the others are not read.
  static F load_first(const float* p, long count, float fill) {
    const I m = first(count);
    return _mm256_blendv_ps(set(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_first(float* p, F v, long count) { _mm256_maskstore_ps(p, first(count), v); }
  static F keep_first(F v, long count) { return _mm256_and_ps(v, _mm256_castsi256_ps(first(count))); }
  static float max_lanes(F v) {
    __m128 t = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_max_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
  }
  // acc[0] holds lanes 0-7, acc[1] 8-15: (A0 + A1) + (A2 + A3), then (0 + 1) + (2 + 3).
  static float sum16(const F* acc) {
    const __m128 a01 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
    const __m128 a23 = _mm_add_ps(_mm256_castps256_ps128(acc[1]), _mm256_extractf128_ps(acc[1], 1));
    const __m128 t = _mm_add_ps(a01, a23);
    const __m128 pairs = _mm_add_ps(t, _mm_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehl_ps(pairs, pairs)));
  }
  static I first(long count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

#include "kernels/cpu/vector_math_impl.h"

}  // namespace

const VectorMathTable* vector_math_avx2() {
  using Fns = vmath_impl::Functions<Avx2>;
  static const VectorMathTable table{Fns::exp_array, Fns::log_array, Fns::tanh_array, Fns::sigmoid_array,
                                     Fns::erf_array, Fns::gelu_array, Fns::softmax, Fns::log_softmax,
                                     Fns::max, Fns::exp_sum, Fns::log_exp_sum, Fns::scale, Fns::subtract};
  return &table;
}

}  // namespace weft::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
