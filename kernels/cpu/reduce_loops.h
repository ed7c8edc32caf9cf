// Reductions of one contiguous run of elements, shared by the reduce and softmax kernels.
//
//   float s = sum_run(x, n);          // pairwise: error grows with log(n), not n
//   float m = max_run(x, n);          // NaN anywhere gives NaN
//
// Floating-point addition is not associative, so the compiler may not vectorise a plain running
// sum on its own; the loops below keep kLanes independent accumulators, which it maps onto SIMD
// registers, and the extra chains also hide the latency of the adds.
#pragma once

#include <cstdint>
#include <type_traits>

namespace weft::cpu {

inline constexpr int kLanes = 16;
// Runs up to this long are summed by one set of lanes; longer runs split in halves (pairwise).
inline constexpr int64_t kPairwiseLeaf = 256;

// Integers wrap around on overflow, as in TensorFlow, instead of being undefined behaviour.
template <class T, bool = std::is_integral_v<T>>
struct WrapIntOf { using type = T; };
template <class T>
struct WrapIntOf<T, true> { using type = std::make_unsigned_t<T>; };
template <class T>
using WrapInt = typename WrapIntOf<T>::type;

template <class T>
T sum_run(const T* __restrict x, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    WrapInt<T> s = 0;  // integer addition is associative: this loop vectorises as written
    for (int64_t i = 0; i < n; ++i) s += static_cast<WrapInt<T>>(x[i]);
    return static_cast<T>(s);
  } else {
    if (n < kLanes) {
      T s = 0;
      for (int64_t i = 0; i < n; ++i) s += x[i];
      return s;
    }
    if (n > kPairwiseLeaf) {
      int64_t half = (n / 2) / kLanes * kLanes;
      return sum_run(x, half) + sum_run(x + half, n - half);
    }
    T lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) lane[k] += x[i + k];
    T tail = 0;
    for (; i < n; ++i) tail += x[i];
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) lane[k] += lane[k + w];
    return lane[0] + tail;
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

template <bool kMax, class T>
T extreme_run(const T* __restrict x, int64_t n) {  // n >= 1
  T lane[kLanes];
  for (int k = 0; k < kLanes; ++k) lane[k] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const T v = x[i + k];
      lane[k] = (kMax ? takes_max(v, lane[k]) : takes_min(v, lane[k])) ? v : lane[k];
    }
  T m = lane[0];
  for (int k = 1; k < kLanes; ++k) m = (kMax ? takes_max(lane[k], m) : takes_min(lane[k], m)) ? lane[k] : m;
  for (; i < n; ++i) m = (kMax ? takes_max(x[i], m) : takes_min(x[i], m)) ? x[i] : m;
  return m;
}

template <class T>
T max_run(const T* x, int64_t n) { return extreme_run<true>(x, n); }
template <class T>
T min_run(const T* x, int64_t n) { return extreme_run<false>(x, n); }

}  // namespace weft::cpu
