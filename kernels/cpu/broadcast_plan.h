// Iterating over broadcast operands without per-element index math.
//
// The output shape and each input's shape are right-aligned; dims where every operand agrees on
// "contiguous" or "broadcast" are merged (kernels/broadcast_dims.h), so (M, N) + (N,) becomes an outer loop of M runs over
// N contiguous elements, and (M, N) + (M, 1) becomes M runs with a scalar right side. Kernels get
// whole runs: (output offset, input offsets, run length, per-input inner stride of 0 or 1).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/broadcast_dims.h"
#include "runtime/shape.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

template <int K>
struct BroadcastPlan {
  std::vector<int64_t> dims;                       // collapsed output dims, outer first
  std::array<std::vector<int64_t>, K> strides;     // per input, per collapsed dim (0 = broadcast)
  int64_t inner = 1;                               // length of the last collapsed dim
  std::array<int64_t, K> inner_stride{};           // 0 or 1 (either for a run of one element)
  int64_t outer = 1;                               // product of the other collapsed dims

  BroadcastPlan(const Shape& out, const std::array<const Shape*, K>& in) {
    MergedBroadcast m = merge_broadcast_dims(out, in, "broadcast");
    dims = std::move(m.dims);
    for (int k = 0; k < K; ++k) strides[k] = std::move(m.strides[k]);
    inner = dims.back();
    for (int k = 0; k < K; ++k) inner_stride[k] = strides[k].back();
    for (size_t i = 0; i + 1 < dims.size(); ++i) outer *= dims[i];
  }

  // Calls run(out_offset, in_offsets, length) for outer rows [begin, end).
  template <class Run>
  void for_rows(int64_t begin, int64_t end, Run&& run) const {
    int64_t nd = static_cast<int64_t>(dims.size()) - 1;
    std::vector<int64_t> idx(nd, 0);
    std::array<int64_t, K> off{};
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      for (int k = 0; k < K; ++k) off[k] += idx[d] * strides[k][d];
    }
    for (int64_t row = begin; row < end; ++row) {
      run(row * inner, off);
      for (int64_t d = nd - 1; d >= 0; --d) {
        for (int k = 0; k < K; ++k) off[k] += strides[k][d];
        if (++idx[d] < dims[d]) break;
        for (int k = 0; k < K; ++k) off[k] -= strides[k][d] * dims[d];
        idx[d] = 0;
      }
    }
  }
};

// Elements per task below which splitting over threads costs more than it saves.
inline constexpr int64_t kCheapGrain = 1 << 15;
inline constexpr int64_t kExpensiveGrain = 1 << 12;

}  // namespace weft::cpu
