// The merged view of an elementwise op's broadcast: the output's dims, with each input's element
// stride per dim (0 where the input is broadcast), after merging neighbouring dims that every
// input steps through as one. (M, N) + (N,) becomes dims {M, N} with strides {N, 1} and {0, 1};
// (A, B, C) + (A, B, C) becomes one dim of A*B*C. The CPU's BroadcastPlan (kernels/cpu/
// broadcast_plan.h) walks it in runs; the CUDA kernels (kernels/cuda/elementwise_geometry.h) index
// it per element. Plain C++, no CUDA.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/shape.h"

namespace weft {

struct MergedBroadcast {
  std::vector<int64_t> dims;                  // merged output dims, outer first; at least one
  std::vector<std::vector<int64_t>> strides;  // strides[k][d]: input k's element stride along dims[d]
};

// Inputs are right-aligned against `out`. Output dims of 1 are dropped (they move no offset); a
// scalar or all-1 output is one dim of 1 with strides 0. InvalidArgument naming `op` for an input
// with more dims than the output or a dim that does not broadcast to the output's.
MergedBroadcast merge_broadcast_dims(const Shape& out, std::span<const Shape* const> inputs, std::string_view op);

}  // namespace weft
