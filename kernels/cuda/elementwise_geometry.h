// Host-side geometry of the CUDA elementwise kernels: per-input broadcast strides over the
// (merged) output dims, and the launch grid. Plain C++ with no CUDA in it, so that it is built and
// unit-tested in every configuration, GPU or not (tests/kernels/elementwise_geometry_test.cpp).
//
//   BroadcastStrides g = broadcast_strides(out.shape(), {&a.shape(), &b.shape()}, "add");
//   // output element i (row-major over g.dims) reads input k at
//   //   sum_d index_d(i) * g.strides[k][d]
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "runtime/shape.h"

namespace weft::cuda {

inline constexpr int kMaxElementwiseInputs = 3;
// Dims left after merging; a kernel argument is a fixed-size struct, so there is a bound. Merging
// makes it rarely matter: only alternating broadcast patterns keep many dims apart.
inline constexpr int kMaxElementwiseRank = 8;

struct BroadcastStrides {
  int num_inputs = 0;
  int rank = 0;                 // number of merged output dims (>= 1)
  int64_t n = 0;                // output elements
  int64_t dims[kMaxElementwiseRank] = {};                              // merged output dims, outer first
  int64_t strides[kMaxElementwiseInputs][kMaxElementwiseRank] = {};    // element strides, 0 = broadcast
  bool same_shape = false;      // every input has n elements: input k's element i is output element i
  bool index32 = false;         // n < 2^31: offsets and indices fit 32-bit arithmetic
};

// The strides of `inputs` (1 to kMaxElementwiseInputs shapes, right-aligned NumPy broadcasting)
// against `out`. Dims of size 1 are dropped and neighbouring dims merged where every input is
// contiguous (or broadcast) across both. InvalidArgument("[op] ...") when an input does not
// broadcast to `out`, when there are too many inputs, or when more than kMaxElementwiseRank dims
// remain after merging.
BroadcastStrides broadcast_strides(const Shape& out, std::initializer_list<const Shape*> inputs, std::string_view op);

// The input offset of output element `i` under `g`, computed as the kernels do (a CPU reference
// for tests).
int64_t broadcast_offset(const BroadcastStrides& g, int input, int64_t i);

struct LaunchGeometry {
  uint32_t blocks = 0;   // 0: nothing to launch (n == 0)
  uint32_t threads = 0;
};
inline constexpr uint32_t kElementwiseThreads = 256;
// Beyond this many blocks the kernels' grid-stride loops take over: more blocks than the GPU can
// hold at once only add scheduling work.
inline constexpr uint32_t kMaxElementwiseBlocks = 65535;
LaunchGeometry launch_geometry(int64_t n);

}  // namespace weft::cuda
