// Helpers for the CPU kernels that only move bytes (transpose, concat, slice, gather).
//
// They dispatch on the element size rather than the dtype: float32 and int32 move the same way,
// so each routine is compiled for four widths instead of nine types.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/thread_pool.h"

namespace weft::cpu {

// Bytes per parallel task below which splitting a copy over threads costs more than it saves.
inline constexpr int64_t kCopyGrainBytes = int64_t{1} << 17;

// Calls f(W{}) with an unsigned integer type exactly one element wide (1, 2, 4 or 8 bytes).
template <class F>
decltype(auto) visit_element_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// One element copy through memcpy: the compiler emits a single move, and no float or Half
// object is ever read through an integer lvalue (which strict aliasing forbids).
template <class W>
inline void copy_element(char* dst, const char* src) {
  std::memcpy(dst, src, sizeof(W));
}

// memcpy split over the pool when it is large enough to be bandwidth-bound on one core.
inline void parallel_memcpy(ThreadPool& pool, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  pool.parallel_for(bytes, kCopyGrainBytes, [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, e - b); });
}

// A multi-index over `dims` (outer first) that keeps two linear offsets in step, so copy loops
// advance by additions instead of dividing per element. Copy one per parallel task.
struct Walk {
  std::vector<int64_t> dims;
  std::vector<int64_t> stride_a, stride_b;
  std::vector<int64_t> idx;
  int64_t a = 0, b = 0;

  void add_dim(int64_t size, int64_t sa, int64_t sb) {
    dims.push_back(size);
    stride_a.push_back(sa);
    stride_b.push_back(sb);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  // Positions the walk at linear index `i` (row-major over dims).
  void seek(int64_t i) {
    idx.assign(dims.size(), 0);
    a = b = 0;
    for (size_t k = dims.size(); k-- > 0;) {
      idx[k] = i % dims[k];
      i /= dims[k];
      a += idx[k] * stride_a[k];
      b += idx[k] * stride_b[k];
    }
  }
  void next() {
    for (size_t k = dims.size(); k-- > 0;) {
      a += stride_a[k];
      b += stride_b[k];
      if (++idx[k] < dims[k]) return;
      a -= stride_a[k] * dims[k];
      b -= stride_b[k] * dims[k];
      idx[k] = 0;
    }
  }
};

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t stride = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    s[k] = stride;
    stride *= dims[k];
  }
  return s;
}

// Defined in transpose.cpp; called from register_array_kernels so register_all.h stays one line
// per family.
void register_transpose_kernels();

}  // namespace weft::cpu
