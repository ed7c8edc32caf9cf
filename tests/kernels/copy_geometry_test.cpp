// The host-side geometry of the CUDA data-movement kernels (kernels/cuda/copy_geometry.h): plain
// C++, so it is checked here on every build, GPU or not, against index-by-index references.
#include "kernels/cuda/copy_geometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/error.h"

namespace weft::cuda {
namespace {

std::vector<int64_t> unflatten(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int64_t d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t flatten(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t off = 0;
  for (int64_t d = 0; d < s.rank(); ++d) off = off * s[d] + idx[static_cast<size_t>(d)];
  return off;
}

Shape random_shape(std::mt19937_64& rng, int rank, int max_dim) {
  std::vector<int64_t> d;
  for (int i = 0; i < rank; ++i) d.push_back(1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_dim)));
  return Shape(d);
}

// Transpose: output index (i_0, ...) reads input index with in[perm[d]] = i_d.
void expect_transpose_matches(const Shape& in, const std::vector<int64_t>& perm_attr) {
  const int64_t r = in.rank();
  std::vector<int64_t> perm = perm_attr;
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm)
    if (p < 0) p += r;
  std::vector<int64_t> out_dims;
  for (int64_t p : perm) out_dims.push_back(in[p]);
  const Shape out(out_dims);
  const TransposePlan plan = simplify_transpose(in, perm_attr);
  const StridedCopy g = transpose_copy(plan, "test");
  ASSERT_EQ(g.n, out.num_elements());
  const std::optional<BatchedTranspose> bt = as_batched_transpose(plan);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    const std::vector<int64_t> o = unflatten(i, out);
    std::vector<int64_t> src(static_cast<size_t>(r));
    for (int64_t d = 0; d < r; ++d) src[static_cast<size_t>(perm[d])] = o[static_cast<size_t>(d)];
    const int64_t want = flatten(src, in);
    ASSERT_EQ(strided_offset(g, i), want) << in.to_string() << " element " << i;
    if (bt) {
      // Output (b, c, r) of the batch reads input (b, r, c).
      const int64_t per = bt->rows * bt->cols;
      const int64_t b = i / per, rem = i % per, c = rem / bt->rows, row = rem % bt->rows;
      ASSERT_EQ(b * per + row * bt->cols + c, want) << in.to_string() << " batched, element " << i;
    }
  }
}

TEST(CopyGeometry, TransposeMatchesIndexByIndex) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 6);
    const Shape in = random_shape(rng, rank, 4);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    if (trial % 5 == 0) perm.clear();             // the default: reversed
    else if (trial % 7 == 0) perm[0] -= rank;     // a negative axis
    expect_transpose_matches(in, perm);
  }
}

TEST(CopyGeometry, TransposeFindsTheBatchedForm) {
  // NCHW -> NHWC: a batch of N (C, H*W) matrices.
  TransposePlan p = simplify_transpose(Shape{2, 3, 4, 5}, {0, 2, 3, 1});
  std::optional<BatchedTranspose> bt = as_batched_transpose(p);
  ASSERT_TRUE(bt);
  EXPECT_EQ(bt->batch, 2);
  EXPECT_EQ(bt->rows, 3);
  EXPECT_EQ(bt->cols, 20);
  // A plain matrix, with size-1 dims dropped.
  bt = as_batched_transpose(simplify_transpose(Shape{1, 7, 1, 9}, {3, 2, 1, 0}));
  ASSERT_TRUE(bt);
  EXPECT_EQ(bt->batch, 1);
  EXPECT_EQ(bt->rows, 7);
  EXPECT_EQ(bt->cols, 9);
  // The inner dim kept in place: not the batched form.
  EXPECT_FALSE(as_batched_transpose(simplify_transpose(Shape{2, 3, 4}, {1, 0, 2})));
  // (2, 0, 1) keeps input dims 0 and 1 together: a (6, 4) matrix transpose.
  bt = as_batched_transpose(simplify_transpose(Shape{2, 3, 4}, {2, 0, 1}));
  ASSERT_TRUE(bt);
  EXPECT_EQ(bt->batch, 1);
  EXPECT_EQ(bt->rows, 6);
  EXPECT_EQ(bt->cols, 4);
  // (0, 3, 1, 2): dims 1 and 2 merge, leaving a batch of 2 (12, 5) matrices.
  bt = as_batched_transpose(simplify_transpose(Shape{2, 3, 4, 5}, {0, 3, 1, 2}));
  ASSERT_TRUE(bt);
  EXPECT_EQ(bt->batch, 2);
  EXPECT_EQ(bt->rows, 12);
  EXPECT_EQ(bt->cols, 5);
  // A full reversal of three dims merges nothing and stays general.
  EXPECT_FALSE(as_batched_transpose(simplify_transpose(Shape{2, 3, 4}, {2, 1, 0})));
  expect_transpose_matches(Shape{2, 3, 4}, {2, 0, 1});
  // Identity and all-ones: at most one dim, a plain copy.
  EXPECT_LE(simplify_transpose(Shape{2, 3, 4}, {0, 1, 2}).dims.size(), 1u);
  EXPECT_TRUE(simplify_transpose(Shape{1, 1}, {1, 0}).dims.empty());
  expect_transpose_matches(Shape{}, {});
  expect_transpose_matches(Shape{1, 1}, {1, 0});
}

TEST(CopyGeometry, TransposeWithZeroDimHasNoElements) {
  const StridedCopy g = transpose_copy(simplify_transpose(Shape{0, 3}, {1, 0}), "test");
  EXPECT_EQ(g.n, 0);
}

TEST(CopyGeometry, TooManyUnmergeableDimsAreRefused) {
  std::vector<int64_t> dims(kMaxCopyRank + 1, 2), perm(kMaxCopyRank + 1);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
  EXPECT_THROW(transpose_copy(simplify_transpose(Shape(dims), perm), "test"), InvalidArgument);
  // Just at the limit is fine.
  dims.pop_back();
  perm.assign(dims.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
  EXPECT_NO_THROW(transpose_copy(simplify_transpose(Shape(dims), perm), "test"));
}

TEST(CopyGeometry, SliceMatchesIndexByIndex) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = static_cast<int>(rng() % 6);
    const Shape in = random_shape(rng, rank, 5);
    std::vector<int64_t> begin, size;
    for (int d = 0; d < rank; ++d) {
      const int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(in[d] + 1));
      const int64_t s = trial % 3 == 0 ? in[d] - b : static_cast<int64_t>(rng() % static_cast<uint64_t>(in[d] - b + 1));
      begin.push_back(trial % 4 == 0 ? 0 : b);
      size.push_back(trial % 4 == 0 ? in[d] : s);
    }
    const Shape out(size);
    const StridedCopy g = slice_copy(in, begin, out, "test");
    ASSERT_EQ(g.n, out.num_elements());
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      std::vector<int64_t> idx = unflatten(i, out);
      for (int d = 0; d < rank; ++d) idx[static_cast<size_t>(d)] += begin[static_cast<size_t>(d)];
      ASSERT_EQ(strided_offset(g, i), flatten(idx, in)) << in.to_string() << " -> " << out.to_string() << " @" << i;
    }
  }
}

TEST(CopyGeometry, SliceOfAWholeTensorIsOneRun) {
  const StridedCopy g = slice_copy(Shape{4, 5, 6}, {0, 0, 0}, Shape{4, 5, 6}, "test");
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.in_strides[0], 1);
  EXPECT_EQ(g.base, 0);
  // Rows 1..2 of a matrix: one contiguous run starting at row 1.
  const StridedCopy rows = slice_copy(Shape{4, 5}, {1, 0}, Shape{2, 5}, "test");
  EXPECT_EQ(rows.rank, 1);
  EXPECT_EQ(rows.in_strides[0], 1);
  EXPECT_EQ(rows.base, 5);
}

TEST(CopyGeometry, PadMatchesIndexByIndex) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = static_cast<int>(rng() % 6);
    const Shape in = random_shape(rng, rank, 4);
    std::vector<int64_t> p, out_dims;
    for (int d = 0; d < rank; ++d) {
      const bool padded = rng() % 2;
      const int64_t b = padded ? static_cast<int64_t>(rng() % 3) : 0, a = padded ? static_cast<int64_t>(rng() % 3) : 0;
      p.push_back(b);
      p.push_back(a);
      out_dims.push_back(b + in[d] + a);
    }
    const Shape out(out_dims);
    const PadGeometry g = pad_geometry(in, p, "test");
    ASSERT_EQ(g.n, out.num_elements());
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      std::vector<int64_t> idx = unflatten(i, out);
      bool inside = true;
      for (int d = 0; d < rank; ++d) {
        idx[static_cast<size_t>(d)] -= p[static_cast<size_t>(2 * d)];
        inside = inside && idx[static_cast<size_t>(d)] >= 0 && idx[static_cast<size_t>(d)] < in[d];
      }
      ASSERT_EQ(pad_source(g, i), inside ? flatten(idx, in) : -1) << in.to_string() << " element " << i;
    }
  }
}

TEST(CopyGeometry, ConcatRowsAndColumns) {
  const Shape a{2, 3, 4}, b{2, 5, 4}, c{2, 0, 4};
  ConcatGeometry g = concat_geometry({&a, &b, &c}, 1);
  EXPECT_EQ(g.outer, 2);
  EXPECT_EQ(g.row, 32);
  EXPECT_EQ(g.width, (std::vector<int64_t>{12, 20, 0}));
  EXPECT_EQ(g.offset, (std::vector<int64_t>{0, 12, 32}));
  g = concat_geometry({&a, &a}, 0);
  EXPECT_EQ(g.outer, 1);
  EXPECT_EQ(g.row, 48);
}

}  // namespace
}  // namespace weft::cuda
