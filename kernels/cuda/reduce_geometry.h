// Host-side geometry of the CUDA reductions (kernels/cuda/reduce.cu): which dims are reduced, the
// input seen as [outer, n, inner] after merging dims, and how the work is cut into blocks. Plain
// C++ with no CUDA in it, unit-tested on the CPU (tests/kernels/reduce_geometry_test.cpp).
//
//   std::vector<char> mask = reduced_mask(shape, axes_attr, "reduce_sum");
//   ReducePlan p = reduce_plan(shape, mask, "reduce_sum");
//   if (p.contiguous) ... y[o, i] = R(x[o, 0..p.n, i]) over the dense [p.outer, p.n, p.inner] input
//   else ...              output element o (row-major over kept_dims) reduces the count elements
//                         at kept offset(o) + reduced offset(k), k row-major over red_dims
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/shape.h"

namespace weft {
struct KernelContext;
}

namespace weft::cuda {

// Kept or reduced groups left after merging, each; a kernel argument is a fixed-size struct.
// Only alternating reduced and kept dims keep groups apart, so a rank-16 input is the least that
// can exceed it.
inline constexpr int kMaxReduceRank = 8;

struct ReducePlan {
  int64_t out_n = 0;   // output elements
  int64_t count = 0;   // input elements reduced into each output element (0: an empty reduction)
  // One reduced group (or none: then n == 1 and inner == out_n): the dense [outer, n, inner] view.
  bool contiguous = true;
  int64_t outer = 1, n = 1, inner = 1;
  // Reduced groups separated by kept ones: element strides of the input, outer group first.
  int kept_rank = 0, red_rank = 0;
  int64_t kept_dims[kMaxReduceRank] = {}, kept_strides[kMaxReduceRank] = {};
  int64_t red_dims[kMaxReduceRank] = {}, red_strides[kMaxReduceRank] = {};
};

// The dims of `shape` an "axes" list reduces: all of them when `axes` is null or empty (as the
// CPU kernel). InvalidArgument("[op] axis A is out of range or repeated for a tensor of rank R").
std::vector<char> reduced_mask(const Shape& shape, const std::vector<int64_t>* axes, std::string_view op);
// The same for the node a kernel runs, from its "axes" attribute: the CPU and CUDA reductions'
// shared start.
std::vector<char> reduced_mask(const KernelContext& ctx, const Shape& shape);

// The plan of reducing the dims of `shape` marked in `reduced`. Size-1 dims are dropped and
// neighbours with the same role merged. InvalidArgument("[op] ...") when more than kMaxReduceRank
// kept or reduced groups remain.
ReducePlan reduce_plan(const Shape& shape, const std::vector<char>& reduced, std::string_view op);

// The input offsets a non-contiguous plan combines, as the kernel computes them (a reference for
// tests): output element o's base, and reduced element k's offset from it.
int64_t kept_offset(const ReducePlan& p, int64_t o);
int64_t reduced_offset(const ReducePlan& p, int64_t k);

inline constexpr int kReduceThreads = 256;       // every reduction kernel's block
inline constexpr int64_t kThreadRowMax = 8;      // rows up to this long: one thread each
inline constexpr int64_t kWarpRowMax = 512;      // rows up to this long: one warp each, else a block
inline constexpr int64_t kMaxReduceBlocks = 1 << 16;  // beyond this the kernels' loops stride

// A segmented pass: `segments` = rows * chunks pieces, chunk `c` of row `r` being elements
// [c * chunk, min(n, (c + 1) * chunk)) of the row. chunks == 1: one pass finishes the rows; else
// the pass leaves rows * chunks partials, reduced by a second pass over [rows, chunks].
struct RowLaunch {
  int64_t chunks = 1, chunk = 0;
  bool thread_per_segment = false; // one thread per (unsplit) row: a warp reads 32 short rows at once
  bool warp_per_segment = false;   // one warp per segment, kReduceThreads / 32 per block
  int64_t blocks = 0;
};
// Rows of n >= 1 contiguous elements. Long rows are split when there are too few rows to give
// `target_blocks` blocks (a few per SM) work, so that a full reduction still fills the GPU.
RowLaunch row_launch(int64_t rows, int64_t n, int64_t target_blocks);

// Columns: y[o, i] = R(x[o, 0..n, i]) with inner > 1. A block is `cols` columns (a power of two,
// at most 32) by kReduceThreads / cols rows, so a warp reads whole contiguous runs even for narrow
// inner dims; the tile's rows are then combined in shared memory. Too few tiles: n is split into
// chunks, as for rows, and the partials [outer, chunks, inner] reduced by a second column pass.
struct ColumnLaunch {
  int cols = 32, rows_per_block = kReduceThreads / 32;
  int64_t col_tiles = 0, chunks = 1, chunk = 0;
  int64_t blocks = 0;
};
ColumnLaunch column_launch(int64_t outer, int64_t n, int64_t inner, int64_t target_blocks);

// Blocks for one warp per item, kReduceThreads / 32 warps a block, capped at kMaxReduceBlocks.
int64_t warp_item_blocks(int64_t items);

// The blocks worth having in flight on a GPU of `sm_count` SMs (a few per SM), below which long
// rows and columns are split; a guess of 80 SMs when the count is unknown (0).
inline int64_t target_blocks(int sm_count) { return 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 80); }

}  // namespace weft::cuda
