// Device-side pieces of the CUDA reductions, shared by the reduce, softmax and normalisation
// families: warp and block combines in a fixed order (the same input gives the same bits on every
// run), the row groups of the row-wise kernels, and the NaN-sticky max of the CPU kernels
// (kernels/cpu/reduce_loops.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace weft::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;

// __shfl_down_sync for the arithmetic types, member by member for a struct with value and index.
template <class A>
__device__ __forceinline__ A shfl_down(A v, int offset) {
  if constexpr (std::is_arithmetic_v<A>) {
    return __shfl_down_sync(kFullWarp, v, offset);
  } else {
    A r;
    r.value = __shfl_down_sync(kFullWarp, v.value, offset);
    r.index = __shfl_down_sync(kFullWarp, v.index, offset);
    return r;
  }
}

// Lane 0 gets the combination of the warp's 32 values (every lane must call it).
template <class A, class Combine>
__device__ __forceinline__ A warp_combine(A v, Combine combine) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(v, shfl_down(v, offset));
  return v;
}

// Every thread gets the combination of the block's values. `scratch` holds one A per warp (32);
// the block is a multiple of 32 threads. Ends with a barrier, so scratch may be reused at once.
template <class A, class Combine>
__device__ __forceinline__ A block_combine(A v, Combine combine, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_combine(v, combine);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = scratch[lane < warps ? lane : 0];
    // Lanes past the last warp repeat warp 0's value; only lanes < warps take part below.
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const A other = shfl_down(w, offset);
      if (lane + offset < warps) w = combine(w, other);
    }
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  const A out = scratch[0];
  __syncthreads();
  return out;
}

struct AddCombine {
  template <class S>
  __device__ S operator()(S a, S b) const { return a + b; }
};

// The warp's or the block's combination of v, in every thread.
template <bool kWarp, class A, class Combine>
__device__ __forceinline__ A group_combine(A v, Combine combine, A* scratch) {
  if constexpr (kWarp) return __shfl_sync(kFullWarp, warp_combine(v, combine), 0);
  else return block_combine(v, combine, scratch);
}

// Where one warp or block sits when each works on rows: its first row, its lane among `lanes`
// threads, the row stride.
template <bool kWarp>
struct RowGroup {
  int lane, lanes;
  int64_t first, stride;
  __device__ RowGroup() {
    const int64_t per_block = kWarp ? blockDim.x >> 5 : 1;
    lane = kWarp ? threadIdx.x & 31 : threadIdx.x;
    lanes = kWarp ? 32 : blockDim.x;
    first = int64_t(blockIdx.x) * per_block + (kWarp ? threadIdx.x >> 5 : 0);
    stride = int64_t(gridDim.x) * per_block;
  }
};


// NaN is sticky: a NaN candidate always wins, nothing displaces a NaN.
template <class T>
__device__ __forceinline__ bool dev_takes_max(T candidate, T current) {
  return (candidate > current) | (candidate != candidate);
}
template <class T>
__device__ __forceinline__ bool dev_takes_min(T candidate, T current) {
  return (candidate < current) | (candidate != candidate);
}

}  // namespace weft::cuda
