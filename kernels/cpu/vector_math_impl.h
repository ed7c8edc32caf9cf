// The algorithms of vector_math.h, written once against a vector type V and instantiated by each
// instruction-set file (vector_math_scalar.cpp, _avx2.cpp, _avx512.cpp) inside its own anonymous
// namespace, after its target pragma. V provides, lane by lane:
//
//   F load(const float*), store(float*, F), set(float)      float vectors
//   add sub mul div, fma(a, b, c) = a * b + c rounded once
//   min(a, b) = a < b ? a : b, max(a, b) = a > b ? a : b   (the x86 rule: NaN a gives b)
//   abs(a), with_sign_of(magnitude, sign)
//   I bits(F), F from_bits(I), iset(int), iadd, isub, sll<k>, sra<k>, to_float(I)
//   M lt(a, b), ge(a, b), eq(a, b), is_nan(a), mor(M, M), select(M, a, b) = m ? a : b
//   any(M); all_within(a, lo, hi): every lane in [lo, hi] (NaN is in none)
//   load_first(p, count, fill), store_first(p, v, count), keep_first(v, count): the first
//   count lanes (the others fill, untouched, 0); max_lanes(v); sum16(acc): the 16 lanes of
//   16 / kLanes vectors added in reduce_loops.h's order
//
// Only exact operations and correctly rounded ones appear, so every V gives the same bits. The
// coefficients are minimax fits (Lawson's iteration on Chebyshev nodes against 40-digit
// references), rounded to float; the comments give each fit's error before that rounding.
//
// Deliberately no #includes: this file is included after a `#pragma GCC target`, where only
// code of weft's own may be compiled for the wider instruction set.
#pragma once

namespace vmath_impl {

// Horner's scheme with fused multiply-adds: c[0] + t * (c[1] + t * (... c[N-1])).
template <class V, int N>
inline typename V::F horner(typename V::F t, const float (&c)[N]) {
  typename V::F p = V::set(c[N - 1]);
  for (int i = N - 2; i >= 0; --i) p = V::fma(p, t, V::set(c[i]));
  return p;
}

// exp's argument reduction: x = n ln2 + r with |r| <= ln2 / 2 (Cody and Waite's two-part ln2, so
// n * kLn2Hi is exact), and p = e^r = 1 + r + r^2 P(r), in [0.7, 1.42]. n is found by adding
// 1.5 * 2^23, which leaves it in the low bits of t: bits(t) = bits(1.5 * 2^23) + n.
inline constexpr float kExpRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer

template <class V>
struct ExpParts {
  typename V::F p;
  typename V::I t_bits;
  typename V::I n() const { return V::isub(t_bits, V::bits(V::set(kExpRound))); }
};

// kOfMinusX: the parts of e^-x, with the negation folded into the first two fused operations
// (fma(x, -log2e, c) and -(n ln2hi) - x are the very values fma(-x, log2e, c) and
// fma(n, -ln2hi, -x) round, since negating is exact): the same bits, one operation fewer.
template <class V, bool kOfMinusX = false>
inline ExpParts<V> exp_parts(typename V::F x) {
  using F = typename V::F;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;            // 9 significant bits
  constexpr float kLn2Lo = -2.12194440054690583e-4f;
  constexpr float kRound = kExpRound;
  // e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]: relative error 3.1e-9.
  static constexpr float kP[] = {0x1.fffffcp-2f, 0x1.555492p-3f, 0x1.5558f2p-5f, 0x1.1239d4p-7f, 0x1.6a244cp-10f};
  const F t = V::fma(x, V::set(kOfMinusX ? -kLog2e : kLog2e), V::set(kRound));
  const F nf = V::sub(t, V::set(kRound));
  F r = kOfMinusX ? V::fnmsub(nf, V::set(kLn2Hi), x) : V::fma(nf, V::set(-kLn2Hi), x);
  r = V::fma(nf, V::set(-kLn2Lo), r);
  return {V::add(V::fma(V::mul(r, r), horner<V>(r, kP), r), V::set(1.0f)), V::bits(t)};
}

// Where exp_normal may be used: e^x is a normal float for every x in [-86, 88], and n's range
// there (-124 to 127) keeps 2^n * p's exponent field in [1, 254].
inline constexpr float kExpNormalLo = -86.0f, kExpNormalHi = 88.0f;

// e^x for x in [kExpNormalLo, kExpNormalHi] only: 2^n * p by adding n to p's exponent bits. The
// result is normal there, so this is exactly the product exp_anywhere forms in two halves: the
// same bits, in 15 operations a vector instead of 27. n << 23 is bits(t) << 23, since
// bits(1.5 * 2^23) = 0x4b400000 has its low 9 bits clear.
template <class V, bool kOfMinusX = false>
inline typename V::F exp_normal(typename V::F x) {
  const ExpParts<V> e = exp_parts<V, kOfMinusX>(x);
  return V::from_bits(V::iadd(V::bits(e.p), V::template sll<23>(e.t_bits)));
}

// exp(x) for any non-NaN x, x clamped to [-104, 89] (beyond that the result is 0 or inf anyway);
// NaN handled by the callers. p is scaled by 2^n in two halves so that n may pass the exponent
// range of one float (results near FLT_MAX, and subnormal ones rounded only once).
template <class V>
inline typename V::F exp_anywhere(typename V::F x) {
  using F = typename V::F;
  using I = typename V::I;
  // Below -104 e^x rounds to +0, as exp_anywhere(-104) does: those lanes compute e^0 instead and
  // are zeroed at the end. Computing them would underflow, and on x86 each product that underflows
  // costs a microcode assist of a hundred cycles or more: with a causal mask's -inf scores (half
  // of attention's) exp was 9 % of nanoGPT's training step, and the step 7 % slower.
  const auto under = V::lt(x, V::set(-104.0f));
  x = V::select(under, V::set(0.0f), V::max(V::min(x, V::set(89.0f)), V::set(-104.0f)));
  const ExpParts<V> e = exp_parts<V>(x);
  const I n = e.n();
  const I n1 = V::template sra<1>(n);
  const I n2 = V::isub(n, n1);
  const F s1 = V::from_bits(V::template sll<23>(V::iadd(n1, V::iset(127))));
  const F s2 = V::from_bits(V::template sll<23>(V::iadd(n2, V::iset(127))));
  return V::select(under, V::set(0.0f), V::mul(V::mul(e.p, s1), s2));
}

template <class V>
inline typename V::F keep_nan(typename V::F x, typename V::F y) {
  return V::select(V::is_nan(x), x, y);
}

// exp_anywhere's bits, through exp_normal when the whole vector allows it (almost always: the
// branch is taken per vector and costs two compares). tanh and sigmoid do the same.
template <class V>
inline typename V::F exp(typename V::F x) {
  if (V::all_within(x, kExpNormalLo, kExpNormalHi)) return exp_normal<V>(x);
  return keep_nan<V>(x, exp_anywhere<V>(x));
}

// log(x) = e ln2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)); f = m - 1, s = f / (2 + f),
// log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)). Subnormal inputs are scaled into range first.
template <class V>
inline typename V::F log(typename V::F x) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440054690583e-4f;
  // R(z) = z Q(z) on z in [0, 0.1716^2]: absolute error 9.6e-12.
  static constexpr float kQ[] = {0x1.555554p-1f, 0x1.999a7ap-2f, 0x1.2438d8p-2f, 0x1.e2f666p-3f};
  const auto tiny = V::lt(x, V::set(0x1p-126f));
  const F xs = V::select(tiny, V::mul(x, V::set(0x1p23f)), x);
  const F e_adjust = V::select(tiny, V::set(-23.0f), V::set(0.0f));
  // Subtracting sqrt(1/2)'s bits leaves the exponent of the interval [sqrt(1/2), sqrt(2)) in the
  // top bits; taking it away from x's bits leaves m.
  const I shifted = V::isub(V::bits(xs), V::iset(0x3f3504f3));
  const I e = V::template sra<23>(shifted);
  const F m = V::from_bits(V::isub(V::bits(xs), V::template sll<23>(e)));
  const F ef = V::add(V::to_float(e), e_adjust);
  const F f = V::sub(m, V::set(1.0f));
  const F s = V::div(f, V::add(V::set(2.0f), f));
  const F z = V::mul(s, s);
  const F r = V::mul(z, horner<V>(z, kQ));
  const F hfsq = V::mul(V::set(0.5f), V::mul(f, f));
  F y = V::fma(s, V::add(hfsq, r), V::mul(ef, V::set(kLn2Lo)));
  y = V::add(V::sub(y, hfsq), f);
  y = V::fma(ef, V::set(kLn2Hi), y);
  const F inf = V::set(__builtin_inff());
  y = V::select(V::eq(x, inf), inf, y);
  y = V::select(V::eq(x, V::set(0.0f)), V::set(-__builtin_inff()), y);
  y = V::select(V::lt(x, V::set(0.0f)), V::set(__builtin_nanf("")), y);
  return keep_nan<V>(x, y);
}

// tanh(|x|) = |x| + |x|^3 P(x^2) below 0.625, else 1 - 2 / (e^{2|x|} + 1), which reaches 1 exactly
// once e^{2|x|} is large (and inf); then x's sign (so tanh(-0) = -0).
template <class V, bool kAnywhere>
inline typename V::F tanh_of(typename V::F x) {
  using F = typename V::F;
  // P on |x| < 0.625: relative error of tanh 1.6e-10.
  static constexpr float kP[] = {-0x1.555554p-2f, 0x1.111066p-3f, -0x1.b9ee90p-5f,
                                 0x1.638b58p-6f,  -0x1.0bf4fap-7f, 0x1.18e1d6p-9f};
  const F a = V::abs(x);
  const F z = V::mul(a, a);
  const F small = V::fma(V::mul(a, z), horner<V>(z, kP), a);
  const F e = kAnywhere ? exp_anywhere<V>(V::add(a, a)) : exp_normal<V>(V::add(a, a));
  const F large = V::sub(V::set(1.0f), V::div(V::set(2.0f), V::add(e, V::set(1.0f))));
  const F y = V::with_sign_of(V::select(V::lt(a, V::set(0.625f)), small, large), x);
  return kAnywhere ? keep_nan<V>(x, y) : y;
}

template <class V>
inline typename V::F tanh(typename V::F x) {
  constexpr float kHalf = kExpNormalHi / 2;  // 2|x| within exp_normal's range
  return V::all_within(x, -kHalf, kHalf) ? tanh_of<V, false>(x) : tanh_of<V, true>(x);
}

// The logistic function as 1 / (1 + e^{-x}) wherever e^{-x} is a normal float (x in [-88, 86]:
// one exponential and one division); below -88, where e^{-x} would overflow, as e^x / (1 + e^x),
// tiny or subnormal; above 86 both round to 1.
template <class V, bool kAnywhere>
inline typename V::F sigmoid_of(typename V::F x) {
  using F = typename V::F;
  const F one = V::set(1.0f);
  if constexpr (!kAnywhere) {
    return V::div(one, V::add(one, exp_normal<V, true>(x)));  // e^-x (sigmoid on 5 M floats: 3 % faster)
  } else {
    const F minus_x = V::sub(V::set(0.0f), x);
    const F usual = V::div(one, V::add(one, exp_anywhere<V>(minus_x)));
    const F e = exp_anywhere<V>(x);
    const F tiny = V::div(e, V::add(one, e));
    return keep_nan<V>(x, V::select(V::lt(x, V::set(-kExpNormalHi)), tiny, usual));
  }
}

template <class V>
inline typename V::F sigmoid(typename V::F x) {  // -x within exp_normal's range: the short path
  return V::all_within(x, -kExpNormalHi, -kExpNormalLo) ? sigmoid_of<V, false>(x) : sigmoid_of<V, true>(x);
}

// erf(|x|) = |x| + |x| R(x^2) below 1 (R(0) = 2/sqrt(pi) - 1: folding the leading 1 out keeps that
// coefficient's rounding from costing most of an ulp); above, 1 - e^{-x^2} G(|x|) with
// G(t) = erfc(t) e^{t^2} fitted on [1, 4] (in t - 2.5), |x| clamped to 4 since erf rounds to 1
// from 3.92 on; then x's sign.
template <class V>
inline typename V::F erf(typename V::F x) {
  using F = typename V::F;
  // R on |x| < 1: relative error of erf 1.2e-9.
  static constexpr float kSmall[] = {0x1.06eba8p-3f, -0x1.81273ep-2f, 0x1.ce2cf8p-4f,   -0x1.b7f90cp-6f,
                                     0x1.5405b0p-8f, -0x1.a3f6fap-11f, 0x1.496a22p-14f};
  // G on [1, 4]: error of erf 0.008 ulp(1).
  static constexpr float kTail[] = {0x1.afbb3ap-3f,  -0x1.30891ap-4f,  0x1.98717ep-6f, -0x1.061df2p-7f,
                                    0x1.4ac22ep-9f,  -0x1.538106p-11f, 0x1.d064a4p-13f, -0x1.25585ap-13f,
                                    -0x1.f4c8f2p-15f, -0x1.db9e82p-16f};
  const F a = V::abs(x);
  const F small = V::fma(a, horner<V>(V::mul(a, a), kSmall), a);
  const F t = V::min(a, V::set(4.0f));
  const F g = horner<V>(V::sub(t, V::set(2.5f)), kTail);
  const F e = exp_normal<V>(V::sub(V::set(0.0f), V::mul(t, t)));  // -t^2 in [-16, 0]
  const F large = V::sub(V::set(1.0f), V::mul(e, g));
  return keep_nan<V>(x, V::with_sign_of(V::select(V::lt(a, V::set(1.0f)), small, large), x));
}

// The exact GELU as its composition: (x * 0.5) * (erf(x * sqrt(1/2)) + 1), each step rounded as
// the separate Mul, Erf, Add and Mul ops round it, so it gives their bits.
template <class V>
inline typename V::F gelu(typename V::F x) {
  const typename V::F e = erf<V>(V::mul(x, V::set(0.7071067811865476f)));
  return V::mul(V::mul(x, V::set(0.5f)), V::add(e, V::set(1.0f)));
}

// y[i] = f(x[i]) over whole vectors, then the tail padded to one vector with zeros by masked
// loads and stores (so a tail element gets the bits it would get anywhere else, and a short array,
// an attention row of a few dozen scores, costs no scalar loop). y may equal x.
template <class V, class Fn>
inline void map_array(const float* x, float* y, long n, Fn f) {
  long i = 0;
  // Two vectors a step: their chains of dependent operations interleave (sigmoid on 5 M floats,
  // two cores: 3 % faster).
  for (; i + 2 * V::kLanes <= n; i += 2 * V::kLanes) {
    const auto a = f(V::load(x + i)), b = f(V::load(x + i + V::kLanes));
    V::store(y + i, a);
    V::store(y + i + V::kLanes, b);
  }
  for (; i + V::kLanes <= n; i += V::kLanes) V::store(y + i, f(V::load(x + i)));
  if (i == n) return;
  V::store_first(y + i, f(V::load_first(x + i, n - i, 0.0f)), n - i);  // the tail among zeros
}

// Softmax (kLog: log-softmax) of `rows` rows of n floats, 1 <= n <= kSoftmaxRowsMax, each row with
// the bits of the separate steps kernels/cpu/nn.cpp takes on a longer row: m = the row's max (NaN
// when it holds one); e = exp(x - m); s = the sum of e in reduce_loops.h's order (element j in
// lane j % 16, the row padded with zeros to a multiple of 16, the 16 lanes folded as
// (l + (l + 4)) + ((l + 8) + (l + 12)) for l < 4 and those four as (0 + 1) + (2 + 3)); then
// y = e * float(1 / double(s)), or for the log y = (x - m) - float(log(double(s))). One pass per
// row in registers, where the separate steps cost a call and a loop each: a 30-class softmax's
// rows were mostly that.

// kRows rows at once, their steps interleaved: each row is a chain of dependent steps (max,
// exp, sum, divide, scale), and one row at a time left the cores waiting on it.
template <class V, bool kLog, int kRows>
inline void softmax_row_group(const float* x, float* y, long n) {
  using F = typename V::F;
  constexpr int W = V::kLanes, kAcc = 16 / W;
  static_assert(16 % W == 0, "a vector is 1, 8 or 16 lanes");
  const long padded = (n + 15) / 16 * 16;
  const float inf = __builtin_inff();
  // Whole vectors only, each stored and loaded at the same place and width: a narrower store
  // followed by a wider load cannot be forwarded, and stalls.
  alignas(64) float buf[kRows][kSoftmaxRowsMax];
  F mv[kRows];
  for (int g = 0; g < kRows; ++g) mv[g] = V::set(-inf);
  auto nan = V::is_nan(mv[0]);
  for (long j = 0; j < n; j += W)
    for (int g = 0; g < kRows; ++g) {
      const float* xr = x + g * n + j;
      const F v = n - j >= W ? V::load(xr) : V::load_first(xr, n - j, -inf);
      mv[g] = V::max(v, mv[g]);
      nan = V::mor(nan, V::is_nan(v));
    }
  float m[kRows];
  for (int g = 0; g < kRows; ++g) m[g] = V::max_lanes(mv[g]);
  if (V::any(nan))  // a row holding NaN has the max NaN, as max_run says
    for (int g = 0; g < kRows; ++g)
      for (long j = 0; j < n; ++j)
        if (x[g * n + j] != x[g * n + j]) m[g] = __builtin_nanf("");
  F mvec[kRows];
  for (int g = 0; g < kRows; ++g) mvec[g] = V::set(m[g]);
  F acc[kRows][kAcc];
  for (int g = 0; g < kRows; ++g)
    for (int q = 0; q < kAcc; ++q) acc[g][q] = V::set(0.0f);
  for (long j0 = 0; j0 < padded; j0 += 16)
    for (int q = 0; q < kAcc; ++q) {  // constant trip counts: acc stays in registers
      const long j = j0 + q * W, count = n - j;
      if (count <= 0) break;  // the rest is the sum's zero padding
      for (int g = 0; g < kRows; ++g) {
        // The padding's lanes are m - m = 0's, then zeroed: exp(-inf) would pass through
        // subnormal numbers, which cost a microcode assist per lane on x86.
        const float* xr = x + g * n + j;
        const F d = V::sub(count >= W ? V::load(xr) : V::load_first(xr, count, m[g]), mvec[g]);
        F ex = exp<V>(d);
        if (count < W) ex = V::keep_first(ex, count);
        V::store(buf[g] + j, kLog ? d : ex);
        acc[g][q] = V::add(acc[g][q], ex);
      }
    }
  F factor[kRows];
  for (int g = 0; g < kRows; ++g) {
    const double sum = static_cast<double>(V::sum16(acc[g]));
    factor[g] = V::set(static_cast<float>(kLog ? __builtin_log(sum) : 1.0 / sum));
  }
  for (long j = 0; j < n; j += W)
    for (int g = 0; g < kRows; ++g) {
      const F v = V::load(buf[g] + j);
      const F out = kLog ? V::sub(v, factor[g]) : V::mul(v, factor[g]);
      if (n - j >= W) V::store(y + g * n + j, out);
      else V::store_first(y + g * n + j, out, n - j);
    }
}

template <class V, bool kLog>
inline void softmax_rows(const float* x, float* y, long rows, long n) {
  constexpr int kGroup = V::kLanes > 1 ? 4 : 1;
  long r = 0;
  for (; r + kGroup <= rows; r += kGroup) softmax_row_group<V, kLog, kGroup>(x + r * n, y + r * n, n);
  for (; r < rows; ++r) softmax_row_group<V, kLog, 1>(x + r * n, y + r * n, n);
}

// The steps of a row longer than kSoftmaxRowsMax (nn.cpp's exp_block and scale_block), whose
// bits they give: d = x - m stored to y, or (softmax) e = exp(d) stored there instead; the sum of e
// over chunks of kSoftmaxChunk elements, each summed in float in sum_run's order (reduce_loops.h:
// halves of whole 16-element steps while longer than kPairwiseLeaf, then each leaf's element j in
// lane j % 16, the leaf padded with zeros, folded as sum16 folds), the chunk sums added in double.
static_assert(kPairwiseLeaf % 16 == 0 && kSoftmaxChunk % 16 == 0, "whole 16-lane steps");

template <class V, bool kLog>
inline float exp_shifted_tree(const float* x, float* y, long n, float m) {
  using F = typename V::F;
  if (n > kPairwiseLeaf) {
    const long half = (n / 2) / 16 * 16;
    const float first = exp_shifted_tree<V, kLog>(x, y, half, m);
    return first + exp_shifted_tree<V, kLog>(x + half, y + half, n - half, m);
  }
  const F mv = V::set(m);
  constexpr int W = V::kLanes, kAcc = 16 / W;
  F acc[kAcc];
  for (int q = 0; q < kAcc; ++q) acc[q] = V::set(0.0f);
  for (long j0 = 0; j0 < n; j0 += 16)
    for (int q = 0; q < kAcc; ++q) {
      const long j = j0 + q * W, count = n - j;
      if (count <= 0) break;  // the rest is the leaf's zero padding
      if (count >= W) {
        const F d = V::sub(V::load(x + j), mv);
        const F ex = exp<V>(d);
        V::store(y + j, kLog ? d : ex);
        acc[q] = V::add(acc[q], ex);
      } else {
        const F d = V::sub(V::load_first(x + j, count, m), mv);  // padding: e^0, then zeroed
        const F ex = V::keep_first(exp<V>(d), count);
        V::store_first(y + j, kLog ? d : ex, count);
        acc[q] = V::add(acc[q], ex);
      }
    }
  return V::sum16(acc);
}

template <class V, bool kLog>
inline double exp_shifted_sum(const float* x, float* y, long n, float m) {
  double s = 0;
  for (long j0 = 0; j0 < n; j0 += kSoftmaxChunk) {
    const long c = n - j0 < kSoftmaxChunk ? n - j0 : kSoftmaxChunk;
    s += static_cast<double>(exp_shifted_tree<V, kLog>(x + j0, y + j0, c, m));
  }
  return s;
}

// The largest of x[0..n), n >= 1, or NaN when x holds one: max_run's value, though where the max
// is zero its sign may differ from max_run's (the steps above then give the same outputs: d = x - m
// differs only in the sign of a zero d, and exp(+-0) = 1). Four chains, as max's latency needs.
template <class V>
inline float row_max(const float* x, long n) {
  using F = typename V::F;
  constexpr int W = V::kLanes;
  const float inf = __builtin_inff();
  F acc[4] = {V::set(-inf), V::set(-inf), V::set(-inf), V::set(-inf)};
  auto nan = V::is_nan(acc[0]);
  long j = 0;
  for (; j + 4 * W <= n; j += 4 * W)
    for (int q = 0; q < 4; ++q) {
      const F v = V::load(x + j + q * W);
      acc[q] = V::max(v, acc[q]);
      nan = V::mor(nan, V::is_nan(v));
    }
  for (; j < n; j += W) {
    const F v = n - j >= W ? V::load(x + j) : V::load_first(x + j, n - j, -inf);
    acc[0] = V::max(v, acc[0]);
    nan = V::mor(nan, V::is_nan(v));
  }
  if (V::any(nan)) return __builtin_nanf("");
  return V::max_lanes(V::max(V::max(acc[0], acc[1]), V::max(acc[2], acc[3])));
}

// y * f (softmax) or y - f (log-softmax), in place.
template <class V, bool kLog>
inline void finish_row(float* y, long n, float f) {
  map_array<V>(y, y, n, [fv = V::set(f)](typename V::F v) { return kLog ? V::sub(v, fv) : V::mul(v, fv); });
}

template <class V>
struct Functions {
  static void exp_array(const float* x, float* y, long n) { map_array<V>(x, y, n, exp<V>); }
  static void log_array(const float* x, float* y, long n) { map_array<V>(x, y, n, log<V>); }
  static void tanh_array(const float* x, float* y, long n) { map_array<V>(x, y, n, tanh<V>); }
  static void sigmoid_array(const float* x, float* y, long n) { map_array<V>(x, y, n, sigmoid<V>); }
  static void erf_array(const float* x, float* y, long n) { map_array<V>(x, y, n, erf<V>); }
  static void gelu_array(const float* x, float* y, long n) { map_array<V>(x, y, n, gelu<V>); }
  static void softmax(const float* x, float* y, long rows, long n) { softmax_rows<V, false>(x, y, rows, n); }
  static void log_softmax(const float* x, float* y, long rows, long n) { softmax_rows<V, true>(x, y, rows, n); }
  static double exp_sum(const float* x, float* y, long n, float m) { return exp_shifted_sum<V, false>(x, y, n, m); }
  static double log_exp_sum(const float* x, float* y, long n, float m) { return exp_shifted_sum<V, true>(x, y, n, m); }
  static float max(const float* x, long n) { return row_max<V>(x, n); }
  static void scale(float* y, long n, float f) { finish_row<V, false>(y, n, f); }
  static void subtract(float* y, long n, float f) { finish_row<V, true>(y, n, f); }
};

}  // namespace vmath_impl
