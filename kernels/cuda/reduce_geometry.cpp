#include "kernels/cuda/reduce_geometry.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

namespace {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A split piece is at least this long: shorter ones cost more in partials than they gain.
constexpr int64_t kMinRowChunk = 8192;
// Column chunks are at least this many block-heights of rows.
constexpr int64_t kMinColumnChunkSteps = 8;

struct Group {
  int64_t size;
  bool reduced;
};

}  // namespace

std::vector<char> reduced_mask(const Shape& shape, const std::vector<int64_t>* axes, std::string_view op) {
  const int64_t rank = shape.rank();
  const bool all = !axes || axes->empty();
  std::vector<char> mask(static_cast<size_t>(rank), all ? 1 : 0);
  if (all) return mask;
  for (int64_t a : *axes) {
    const int64_t k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank || mask[k])
      throw InvalidArgument("[" + std::string(op) + "] axis " + std::to_string(a) +
                            " is out of range or repeated for a tensor of rank " + std::to_string(rank));
    mask[k] = 1;
  }
  return mask;
}

std::vector<char> reduced_mask(const KernelContext& ctx, const Shape& shape) {
  const AttrValue* attr = ctx.attrs.find("axes");
  return reduced_mask(shape, attr ? std::get_if<std::vector<int64_t>>(attr) : nullptr, ctx.op.display);
}

ReducePlan reduce_plan(const Shape& shape, const std::vector<char>& reduced, std::string_view op) {
  ReducePlan p;
  p.out_n = 1;
  p.count = 1;
  for (int64_t i = 0; i < shape.rank(); ++i) (reduced[i] ? p.count : p.out_n) *= shape[i];
  if (p.out_n == 0 || p.count == 0) return p;  // nothing to read: the caller fills or returns

  std::vector<Group> groups;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    const bool r = reduced[i] != 0;
    if (!groups.empty() && groups.back().reduced == r) groups.back().size *= shape[i];
    else groups.push_back({shape[i], r});
  }
  const auto reduced_groups = std::count_if(groups.begin(), groups.end(), [](const Group& g) { return g.reduced; });
  if (reduced_groups == 0) {  // only size-1 dims reduced: every output element is one input element
    p.outer = 1;
    p.n = 1;
    p.inner = p.out_n;
    return p;
  }
  if (reduced_groups == 1) {
    bool before = true;
    for (const Group& g : groups) {
      if (g.reduced) {
        p.n = g.size;
        before = false;
      } else {
        (before ? p.outer : p.inner) *= g.size;
      }
    }
    return p;
  }
  p.contiguous = false;
  int64_t stride = 1;
  std::vector<int64_t> strides(groups.size());
  for (size_t g = groups.size(); g-- > 0;) {
    strides[g] = stride;
    stride *= groups[g].size;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    int& rank = groups[g].reduced ? p.red_rank : p.kept_rank;
    if (rank == kMaxReduceRank)
      throw InvalidArgument("[" + std::string(op) + "] the CUDA kernel reduces at most " +
                            std::to_string(kMaxReduceRank) + " separate groups of reduced and of kept dims, and " +
                            shape.to_string() + " with these axes has more");
    (groups[g].reduced ? p.red_dims : p.kept_dims)[rank] = groups[g].size;
    (groups[g].reduced ? p.red_strides : p.kept_strides)[rank] = strides[g];
    ++rank;
  }
  return p;
}

namespace {
int64_t offset_of(int64_t i, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}
}  // namespace

int64_t kept_offset(const ReducePlan& p, int64_t o) { return offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides); }
int64_t reduced_offset(const ReducePlan& p, int64_t k) { return offset_of(k, p.red_rank, p.red_dims, p.red_strides); }

RowLaunch row_launch(int64_t rows, int64_t n, int64_t target_blocks) {
  RowLaunch l;
  l.chunk = n;
  if (rows < target_blocks && n >= 2 * kMinRowChunk) {
    const int64_t want = std::min(ceil_div(n, kMinRowChunk), ceil_div(target_blocks, rows));
    l.chunk = ceil_div(n, want);
    l.chunks = ceil_div(n, l.chunk);  // no empty chunk
  }
  const int64_t segments = rows * l.chunks;
  if (l.chunk <= kThreadRowMax) {
    l.thread_per_segment = true;
    l.blocks = std::min(ceil_div(segments, kReduceThreads), kMaxReduceBlocks);
    return l;
  }
  l.warp_per_segment = l.chunk <= kWarpRowMax;
  l.blocks = l.warp_per_segment ? warp_item_blocks(segments) : std::min(segments, kMaxReduceBlocks);
  return l;
}

ColumnLaunch column_launch(int64_t outer, int64_t n, int64_t inner, int64_t target_blocks) {
  ColumnLaunch l;
  l.cols = 1;
  while (l.cols < 32 && l.cols < inner) l.cols *= 2;
  l.rows_per_block = kReduceThreads / l.cols;
  l.col_tiles = ceil_div(inner, l.cols);
  l.chunk = n;
  const int64_t tiles = outer * l.col_tiles;
  const int64_t min_chunk = kMinColumnChunkSteps * l.rows_per_block;
  if (tiles < target_blocks && n >= 2 * min_chunk) {
    const int64_t want = std::min(ceil_div(n, min_chunk), ceil_div(target_blocks, tiles));
    l.chunk = ceil_div(n, want);
    l.chunks = ceil_div(n, l.chunk);
  }
  l.blocks = std::min(tiles * l.chunks, kMaxReduceBlocks);
  return l;
}

int64_t warp_item_blocks(int64_t items) {
  return std::min(ceil_div(items, kReduceThreads / 32), kMaxReduceBlocks);
}

}  // namespace weft::cuda
