// Shared helpers for the op tests: NumPy broadcasting done the slow, obvious way, deterministic
// test data, and value comparison. Everything here is independent of weft's kernels, so a test
// that compares an op with a reference built from these can fail.
#pragma once

#include <gtest/gtest.h>
#include <weft/weft.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace weft::ref {

// How many GPUs this process has (tests of GPUs skip without enough).
inline int gpu_count() {
  int n = 0;
  for (const DeviceInfo& d : list_devices()) n += d.type == "GPU";
  return n;
}

// NumPy broadcasting of two shapes; nullopt when they do not broadcast.
inline std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  int64_t r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    int64_t ia = i - (r - a.rank()), ib = i - (r - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(out);
}

// Row-major index into `in` of the element that output element `flat` (of shape `out`) reads.
inline int64_t source_index(const Shape& out, const Shape& in, int64_t flat) {
  int64_t index = 0, in_stride = 1;
  for (int64_t i = out.rank() - 1; i >= 0; --i) {
    int64_t coord = flat % out[i];
    flat /= out[i];
    int64_t j = i - (out.rank() - in.rank());
    if (j < 0) continue;
    if (in[j] != 1) index += coord * in_stride;
    in_stride *= in[j];
  }
  return index;
}

// source_index for every output element at once, walking the output like an odometer (the
// per-element divisions of source_index dominate the suite's run time under sanitizers).
inline std::vector<int64_t> source_indices(const Shape& out, const Shape& in) {
  const int64_t r = out.rank(), n = out.num_elements();
  std::vector<int64_t> stride(static_cast<size_t>(r), 0);  // in's stride along each output dim
  int64_t s = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    int64_t j = i - (r - in.rank());
    if (j < 0) continue;
    if (in[j] != 1) stride[static_cast<size_t>(i)] = s;
    s *= in[j];
  }
  std::vector<int64_t> result(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::vector<int64_t> coord(static_cast<size_t>(r), 0);
  int64_t index = 0;
  for (int64_t k = 0; k < n; ++k) {
    result[static_cast<size_t>(k)] = index;
    for (int64_t i = r - 1; i >= 0; --i) {
      auto u = static_cast<size_t>(i);
      index += stride[u];
      if (++coord[u] < out[i]) break;
      index -= stride[u] * out[i];
      coord[u] = 0;
    }
  }
  return result;
}

// The first index where pred(i) is false, or -1. Checking in a plain loop and asserting once keeps
// million-element comparisons cheap in unoptimised builds.
template <class Pred>
int64_t first_failure(int64_t n, Pred pred) {
  for (int64_t i = 0; i < n; ++i)
    if (!pred(i)) return i;
  return -1;
}

// Deterministic values in [lo, hi]; integers are uniform over the integers of that range.
template <class T>
std::vector<T> random_values(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = (rng() & 1) != 0;
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (auto& x : v) x = static_cast<T>(d(rng));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

template <class T>
std::vector<T> full_range_values(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  std::uniform_int_distribution<T> d(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
  for (auto& x : v) x = d(rng);
  return v;
}

// Exact equality for integers and bools; for floats, NaN matches NaN, infinities match by sign,
// and finite values within rel * |want| + abs.
template <class T>
bool close(T got, T want, double rel = 0, double abs = 0) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want) || std::isinf(got)) return got == want;
    return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <=
           rel * std::fabs(static_cast<double>(want)) + abs;
  } else {
    return got == want;
  }
}

// Shapes every binary op is checked on: equal shapes, scalars either side, row and column
// vectors, two-sided broadcasting, rank 0 with rank 0, zero-size dims, odd sizes, more than six
// dims, and sizes big enough to be split over the thread pool.
inline std::vector<std::pair<Shape, Shape>> binary_cases(bool include_large = true) {
  std::vector<std::pair<Shape, Shape>> c = {
      {{7}, {7}},          {{}, {}},           {{}, {33, 17}},      {{33, 17}, {}},      {{5, 7}, {7}},
      {{5, 1}, {5, 7}},    {{3, 1, 5}, {1, 4, 1}}, {{0}, {0}},      {{0, 3}, {1, 3}},    {{3, 0}, {3, 1}},
      {{2, 0, 4}, {1}},    {{}, {0}},          {{1}, {1}},          {{1}, {7}},          {{33, 17}, {33, 17}},
      {{4, 1, 1, 3}, {2, 3}}, {{1, 1}, {}},    {{1}, {3, 1}},       {{7, 1}, {1, 1, 7}},
      {{2, 3, 1, 2, 1, 3, 2}, {3, 1}},
  };
  if (include_large) {  // one of each loop the kernels have: flat, scalar, row runs, both sides
    c.push_back({{1 << 20}, {1 << 20}});
    c.push_back({{}, {1 << 20}});
    c.push_back({{1024, 1024}, {1024}});
    c.push_back({{1024, 1}, {1, 1024}});
  }
  return c;
}

inline std::vector<Shape> unary_cases() {
  return {{}, {1}, {7}, {33, 17}, {0}, {2, 0, 3}, Shape(std::vector<int64_t>{2, 3, 1, 2, 1, 3, 2}), {1 << 20}};
}

// The message of the exception of type E that `f` throws; fails the test otherwise.
template <class E = Error, class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace weft::ref
