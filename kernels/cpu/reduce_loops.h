// Reductions of one contiguous run of elements, shared by the reduce and softmax kernels.
//
//   float s = sum_run(x, n);          // pairwise: error grows with log(n), not n
//   float m = max_run(x, n);          // NaN anywhere gives NaN
//   int64_t i = argmax_run(x, n);     // first index of the largest value (or of the first NaN)
//
// Floating-point addition is not associative and the NaN rules of max are not those of the SIMD
// instructions, so the compiler will not vectorise these reductions by itself. The loops keep
// kVecs independent 16-byte vectors of lanes instead (GCC/Clang vector extensions): 16 bytes is
// SIMD on every x86-64 and ARM64 target (wider vectors on a target without them are split into
// scalar code), and four chains hide the latency of the adds. The lane layout is fixed by the
// type, not the target, so every build returns the same bits. A sum's order, for a run of at most
// kPairwiseLeaf: element j into lane j % 16 of four float vectors (j % 8 of four double ones),
// the run padded with zeros to whole vectors, then the vectors as (0 + 1) + (2 + 3) and their
// lanes likewise (lane_sum); vector_math.h's one-pass softmax rows add in this very order.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace weft::cpu {

template <class T>
struct VecOf {
  typedef T type __attribute__((vector_size(16)));  // an alias template would drop the attribute
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
inline constexpr int kVecLen = static_cast<int>(16 / sizeof(T));
inline constexpr int kVecs = 4;
// Elements consumed by one step of the vector loops.
template <class T>
inline constexpr int kStep = kVecLen<T> * kVecs;

template <class T>
inline Vec<T> load_vec(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The lanes of a vector added in pairs, then the pairs.
template <class T>
inline T lane_sum(const Vec<T>& t) {
  if constexpr (kVecLen<T> == 4) {
    return (t[0] + t[1]) + (t[2] + t[3]);
  } else {
    static_assert(kVecLen<T> == 2, "float and double only");
    return t[0] + t[1];
  }
}

// Runs up to this long are summed by one set of vectors; longer runs split in halves (pairwise).
inline constexpr int64_t kPairwiseLeaf = 256;

// Integers wrap around on overflow, as in TensorFlow, instead of being undefined behaviour.
template <class T, bool = std::is_integral_v<T>>
struct WrapIntOf {
  using type = T;
};
template <class T>
struct WrapIntOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using WrapInt = typename WrapIntOf<T>::type;

template <class T>
T sum_run(const T* x, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    WrapInt<T> s = 0;  // integer addition is associative: this loop vectorises as written
    for (int64_t i = 0; i < n; ++i) s += static_cast<WrapInt<T>>(x[i]);
    return static_cast<T>(s);
  } else {
    constexpr int L = kVecLen<T>, S = kStep<T>;
    if (n > kPairwiseLeaf) {
      const int64_t half = (n / 2) / S * S;
      return sum_run(x, half) + sum_run(x + half, n - half);
    }
    Vec<T> acc[kVecs] = {};
    int64_t i = 0;
    for (; i + S <= n; i += S)
      for (int j = 0; j < kVecs; ++j) acc[j] += load_vec(x + i + j * L);
    if (i < n) {
      // The rest padded with zeros to one more step (adding +0 changes no sum but a -0 one, which
      // starts from +0 anyway): short rows stay vectorised, where a chain of up to 15 dependent
      // scalar adds took most of a 30-class softmax's row before, and a kernel with wider vectors
      // (vector_math.h's softmax rows) can add the same lanes in the same order.
      T pad[S] = {};
      std::memcpy(pad, x + i, static_cast<size_t>(n - i) * sizeof(T));
      for (int j = 0; j < kVecs; ++j) acc[j] += load_vec(pad + j * L);
    }
    return lane_sum<T>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

// The update rules keep NaN sticky: once an accumulator holds NaN no comparison replaces it with a
// number, and a NaN element always replaces a number. Bitwise | (not ||) keeps the loops branch-free.
template <class T>
inline bool takes_max(T candidate, T current) {
  return (candidate > current) | (candidate != candidate);
}
template <class T>
inline bool takes_min(T candidate, T current) {
  return (candidate < current) | (candidate != candidate);
}

// The vector loop tracks NaN apart from the max: `v > acc ? v : acc` is then exactly one MAXPS,
// and a NaN lane mask costs one compare and one OR.
template <bool kMax, class T>
T extreme_run(const T* x, int64_t n) {  // n >= 1
  constexpr int L = kVecLen<T>, S = kStep<T>;
  T m = x[0];
  if (n < L) {
    for (int64_t i = 1; i < n; ++i) m = (kMax ? takes_max(x[i], m) : takes_min(x[i], m)) ? x[i] : m;
    return m;
  }
  Vec<T> acc[kVecs];
  decltype(acc[0] != acc[0]) nan[kVecs];
  int64_t i = 0;
  for (int j = 0; j < kVecs; ++j) {  // n < S: every accumulator starts from the first vector
    acc[j] = load_vec(x + (n >= S ? j * L : 0));
    nan[j] = acc[j] != acc[j];
  }
  if (n >= S) {
    for (i = S; i + S <= n; i += S)
      for (int j = 0; j < kVecs; ++j) {
        const Vec<T> v = load_vec(x + i + j * L);
        acc[j] = (kMax ? v > acc[j] : v < acc[j]) ? v : acc[j];
        nan[j] |= v != v;
      }
  } else {
    i = L;
  }
  // The rest a vector at a time, the last one overlapping what came before: the max and the min
  // are idempotent, so elements seen twice change nothing (short rows stay vectorised).
  for (bool last = false; i < n && !last; i += L) {
    last = i + L >= n;
    const Vec<T> v = load_vec(x + (last ? n - L : i));
    acc[0] = (kMax ? v > acc[0] : v < acc[0]) ? v : acc[0];
    nan[0] |= v != v;
  }
  // The accumulators into one vector, then its lanes: a short row (a softmax over 30 classes)
  // spent most of its time here when every lane of every accumulator was visited one by one.
  for (int j = 1; j < kVecs; ++j) {
    acc[0] = (kMax ? acc[j] > acc[0] : acc[j] < acc[0]) ? acc[j] : acc[0];
    nan[0] |= nan[j];
  }
  bool any_nan = false;
  for (int k = 0; k < L; ++k) {
    any_nan |= nan[0][k] != 0;
    m = (kMax ? acc[0][k] > m : acc[0][k] < m) ? acc[0][k] : m;
  }
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

template <class T>
T max_run(const T* x, int64_t n) { return extreme_run<true>(x, n); }
template <class T>
T min_run(const T* x, int64_t n) { return extreme_run<false>(x, n); }

// Two passes, the vectorised max and then a search for its first occurrence, beat one pass that
// carries an index through a chain of dependent compares.
template <class T>
int64_t argmax_run(const T* x, int64_t n) {  // n >= 1
  const T m = max_run(x, n);
  int64_t i = 0;
  if (m != m) {
    while (x[i] == x[i]) ++i;
  } else {
    while (x[i] != m) ++i;
  }
  return i;
}

}  // namespace weft::cpu
