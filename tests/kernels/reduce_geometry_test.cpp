// The host-side geometry of the CUDA reductions (kernels/cuda/reduce_geometry.h): plain C++, so
// it is checked here on every build, GPU or not.
#include "kernels/cuda/reduce_geometry.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/error.h"

namespace weft::cuda {
namespace {

// For every input element (by flat offset): its output element (row-major over the kept dims)
// and its index among the reduced elements (row-major over the reduced dims), then the offset
// the plan gives for that pair must be the element's own.
void expect_plan_covers(const Shape& shape, const std::vector<char>& reduced) {
  const ReducePlan p = reduce_plan(shape, reduced, "test");
  int64_t out_n = 1, count = 1;
  for (int64_t d = 0; d < shape.rank(); ++d) (reduced[d] ? count : out_n) *= shape[d];
  ASSERT_EQ(p.out_n, out_n);
  ASSERT_EQ(p.count, count);
  if (out_n == 0 || count == 0) return;
  if (p.contiguous) {
    ASSERT_EQ(p.outer * p.inner, out_n);
    ASSERT_EQ(p.n, count);
  }
  std::vector<int64_t> seen(static_cast<size_t>(out_n * count), -1);
  const int64_t total = shape.num_elements();
  for (int64_t flat = 0; flat < total; ++flat) {
    std::vector<int64_t> idx(shape.rank());
    for (int64_t d = shape.rank() - 1, rem = flat; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    int64_t o = 0, k = 0;
    for (int64_t d = 0; d < shape.rank(); ++d) {
      if (reduced[d]) k = k * shape[d] + idx[d];
      else o = o * shape[d] + idx[d];
    }
    int64_t off;
    if (p.contiguous) off = ((o / p.inner) * p.n + k) * p.inner + o % p.inner;
    else off = kept_offset(p, o) + reduced_offset(p, k);
    ASSERT_EQ(off, flat) << shape.to_string() << " output " << o << " reduced element " << k;
    ASSERT_EQ(seen[o * count + k], -1);
    seen[o * count + k] = flat;
  }
}

TEST(ReduceGeometry, MaskOfAxes) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(reduced_mask(s, nullptr, "t"), (std::vector<char>{1, 1, 1}));
  const std::vector<int64_t> none, some{-1, 0};
  EXPECT_EQ(reduced_mask(s, &none, "t"), (std::vector<char>{1, 1, 1}));
  EXPECT_EQ(reduced_mask(s, &some, "t"), (std::vector<char>{1, 0, 1}));
  const std::vector<int64_t> out_of_range{3}, repeated{1, -2}, negative{-4};
  EXPECT_THROW(reduced_mask(s, &out_of_range, "t"), InvalidArgument);
  EXPECT_THROW(reduced_mask(s, &repeated, "t"), InvalidArgument);
  EXPECT_THROW(reduced_mask(s, &negative, "t"), InvalidArgument);
  try {
    reduced_mask(s, &repeated, "reduce_sum");
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[reduce_sum] axis -2 is out of range or repeated for a tensor of rank 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReduceGeometry, ContiguousViews) {
  ReducePlan p = reduce_plan(Shape{3, 4, 5}, {0, 1, 0}, "t");
  EXPECT_TRUE(p.contiguous);
  EXPECT_EQ(p.outer, 3);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.inner, 5);
  p = reduce_plan(Shape{3, 1, 4, 5}, {1, 1, 1, 0}, "t");  // size-1 dims merge through
  EXPECT_TRUE(p.contiguous);
  EXPECT_EQ(p.outer, 1);
  EXPECT_EQ(p.n, 12);
  EXPECT_EQ(p.inner, 5);
  p = reduce_plan(Shape{3, 4, 1}, {0, 0, 1}, "t");  // only a size-1 dim: a copy
  EXPECT_TRUE(p.contiguous);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.outer * p.inner, 12);
  p = reduce_plan(Shape{}, {}, "t");  // a scalar
  EXPECT_EQ(p.out_n, 1);
  EXPECT_EQ(p.count, 1);
  p = reduce_plan(Shape{3, 4, 5}, {1, 0, 1}, "t");
  EXPECT_FALSE(p.contiguous);
  EXPECT_EQ(p.kept_rank, 1);
  EXPECT_EQ(p.red_rank, 2);
}

TEST(ReduceGeometry, EveryMaskOfSmallShapesMapsEveryElementOnce) {
  const std::vector<Shape> shapes = {Shape{5},          Shape{3, 4},       Shape{2, 3, 4},   Shape{2, 1, 3, 1, 2},
                                     Shape{3, 2, 2, 3, 2}, Shape{1, 1},     Shape{4, 1, 5},   Shape{2, 3, 2, 3, 2, 3},
                                     Shape{0, 3},       Shape{3, 0, 2}};
  for (const Shape& s : shapes) {
    const int64_t r = s.rank();
    for (int64_t bits = 0; bits < (int64_t{1} << r); ++bits) {
      std::vector<char> mask(static_cast<size_t>(r));
      for (int64_t d = 0; d < r; ++d) mask[d] = (bits >> d) & 1;
      expect_plan_covers(s, mask);
    }
  }
}

TEST(ReduceGeometry, TooManySeparateGroupsAreRefused) {
  std::vector<int64_t> dims(18, 2);
  std::vector<char> mask(18);
  for (size_t d = 0; d < mask.size(); ++d) mask[d] = d % 2;
  EXPECT_THROW(reduce_plan(Shape(dims), mask, "t"), InvalidArgument);
  dims.resize(16);
  mask.resize(16);
  EXPECT_NO_THROW(reduce_plan(Shape(dims), mask, "t"));
}

void expect_chunks_cover(int64_t n, int64_t chunks, int64_t chunk) {
  ASSERT_GE(chunks, 1);
  ASSERT_GE(chunk, 1);
  EXPECT_GE(chunks * chunk, n);
  EXPECT_LT((chunks - 1) * chunk, n) << "an empty chunk";
}

TEST(ReduceGeometry, RowLaunches) {
  for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{100}, int64_t{100000}})
    for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{9}, int64_t{31}, int64_t{512}, int64_t{513}, int64_t{20000},
                      int64_t{(1 << 22) + 3}})
      for (int64_t target : {int64_t{0}, int64_t{528}}) {
        const RowLaunch l = row_launch(rows, n, target);
        expect_chunks_cover(n, l.chunks, l.chunk);
        EXPECT_EQ(l.thread_per_segment, l.chunk <= kThreadRowMax);
        EXPECT_EQ(l.warp_per_segment, l.chunk > kThreadRowMax && l.chunk <= kWarpRowMax);
        if (l.thread_per_segment) {
          EXPECT_EQ(l.chunks, 1);
        }
        EXPECT_GE(l.blocks, 1);
        EXPECT_LE(l.blocks, kMaxReduceBlocks);
        if (target == 0) {
          EXPECT_EQ(l.chunks, 1);
        }
      }
  const RowLaunch full = row_launch(1, int64_t{1} << 24, 528);  // a full reduction fills the GPU
  EXPECT_GE(full.chunks, 100);
  EXPECT_FALSE(full.warp_per_segment);
  EXPECT_EQ(row_launch(10000, int64_t{1} << 20, 528).chunks, 1);  // enough rows already
}

TEST(ReduceGeometry, ColumnLaunches) {
  for (int64_t outer : {int64_t{1}, int64_t{3}, int64_t{1000}})
    for (int64_t n : {int64_t{1}, int64_t{9}, int64_t{4096}, int64_t{1} << 20})
      for (int64_t inner : {int64_t{2}, int64_t{3}, int64_t{32}, int64_t{33}, int64_t{5000}})
        for (int64_t target : {int64_t{0}, int64_t{528}}) {
          const ColumnLaunch l = column_launch(outer, n, inner, target);
          EXPECT_EQ(l.cols & (l.cols - 1), 0) << "a power of two";
          EXPECT_LE(l.cols, 32);
          EXPECT_GE(l.cols, inner < 32 ? inner : 32);
          EXPECT_EQ(l.cols * l.rows_per_block, kReduceThreads);
          EXPECT_GE(l.col_tiles * l.cols, inner);
          EXPECT_LT((l.col_tiles - 1) * l.cols, inner);
          expect_chunks_cover(n, l.chunks, l.chunk);
          EXPECT_GE(l.blocks, 1);
          EXPECT_LE(l.blocks, kMaxReduceBlocks);
          if (target == 0) {
            EXPECT_EQ(l.chunks, 1);
          }
        }
  EXPECT_GT(column_launch(1, int64_t{1} << 20, 4, 528).chunks, 1);  // tall and narrow: split
}

TEST(ReduceGeometry, TargetBlocks) {
  EXPECT_EQ(target_blocks(132), 528);
  EXPECT_EQ(target_blocks(0), 320);  // unknown SM count: a guess, never 0 (0 would never split)
}

TEST(ReduceGeometry, WarpItemBlocks) {
  EXPECT_EQ(warp_item_blocks(1), 1);
  EXPECT_EQ(warp_item_blocks(8), 1);
  EXPECT_EQ(warp_item_blocks(9), 2);
  EXPECT_EQ(warp_item_blocks(int64_t{1} << 40), kMaxReduceBlocks);
}

}  // namespace
}  // namespace weft::cuda
