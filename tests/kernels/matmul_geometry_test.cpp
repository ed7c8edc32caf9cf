// The host-side geometry of the CUDA MatMul / FusedMatMul (kernels/cuda/matmul_geometry.h): plain
// C++, so it is checked here on every build, GPU or not. Each case executes the geometry the way
// cuBLASLt would (column-major, strided batches) on integers and compares the result with a naive
// row-major product that applies NumPy's batch broadcasting index by index.
#include "kernels/cuda/matmul_geometry.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace weft::cuda {
namespace {

// NumPy's broadcast of the batch dims, then (m, n).
Shape out_shape(const Shape& a, const Shape& b, bool ta, bool tb) {
  const int64_t ra = a.rank() - 2, rb = b.rank() - 2, r = std::max(ra, rb);
  std::vector<int64_t> out(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    const int64_t ia = i - (r - ra), ib = i - (r - rb);
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  out.push_back(ta ? a[a.rank() - 1] : a[a.rank() - 2]);
  out.push_back(tb ? b[b.rank() - 2] : b[b.rank() - 1]);
  return Shape(out);
}

// The flat index of the matrix of `in` (batch dims only) that output batch `batch` reads.
int64_t batch_matrix(const Shape& out, const Shape& in, int64_t batch) {
  const int64_t ro = out.rank() - 2, ri = in.rank() - 2;
  std::vector<int64_t> idx(static_cast<size_t>(ro));
  for (int64_t d = ro - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = batch % out[d];
    batch /= out[d];
  }
  int64_t m = 0;
  for (int64_t j = 0; j < ri; ++j) m = m * in[j] + (in[j] == 1 ? 0 : idx[static_cast<size_t>(j + ro - ri)]);
  return m;
}

std::vector<int64_t> naive(const Shape& as, const Shape& bs, const Shape& os, bool ta, bool tb,
                           const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const int64_t m = os[os.rank() - 2], n = os[os.rank() - 1], k = ta ? as[as.rank() - 2] : as[as.rank() - 1];
  const int64_t ar = as[as.rank() - 2], ac = as[as.rank() - 1], br = bs[bs.rank() - 2], bc = bs[bs.rank() - 1];
  const int64_t batches = m * n > 0 ? os.num_elements() / (m * n) : 0;
  std::vector<int64_t> c(static_cast<size_t>(os.num_elements()), 0);
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t* pa = a.data() + batch_matrix(os, as, t) * ar * ac;
    const int64_t* pb = b.data() + batch_matrix(os, bs, t) * br * bc;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int64_t p = 0; p < k; ++p) s += (ta ? pa[p * ac + i] : pa[i * ac + p]) * (tb ? pb[j * bc + p] : pb[p * bc + j]);
        c[static_cast<size_t>(t * m * n + i * n + j)] = s;
      }
  }
  return c;
}

// Column-major element (r, c) of a stored LtMatrix, through its transpose flag.
int64_t lt_at(const LtMatrix& mat, const int64_t* p, int64_t r, int64_t c) {
  return mat.transposed ? p[c + r * mat.ld] : p[r + c * mat.ld];
}

// What cuBLASLt computes for the geometry: D = op(lt_a) op(lt_b) per batch of every run.
std::vector<int64_t> as_cublaslt_would(const GemmGeometry& g, int64_t out_elements, const std::vector<int64_t>& a,
                                       const std::vector<int64_t>& b) {
  std::vector<int64_t> c(static_cast<size_t>(out_elements), -999);
  const int64_t op_a_rows = g.lt_a.transposed ? g.lt_a.cols : g.lt_a.rows;
  const int64_t op_a_cols = g.lt_a.transposed ? g.lt_a.rows : g.lt_a.cols;
  const int64_t op_b_rows = g.lt_b.transposed ? g.lt_b.cols : g.lt_b.rows;
  const int64_t op_b_cols = g.lt_b.transposed ? g.lt_b.rows : g.lt_b.cols;
  EXPECT_EQ(op_a_rows, g.lt_c.rows);
  EXPECT_EQ(op_a_cols, op_b_rows);
  EXPECT_EQ(op_b_cols, g.lt_c.cols);
  for (const LtMatrix* mat : {&g.lt_a, &g.lt_b, &g.lt_c}) EXPECT_GE(mat->ld, std::max<int64_t>(mat->rows, 1));
  int64_t next_c = 0;
  for (const GemmRun& run : g.runs) {
    EXPECT_EQ(run.c_offset, next_c);  // the runs cover C in order
    EXPECT_GE(run.count, 1);
    for (int64_t t = 0; t < run.count; ++t) {
      const int64_t* pa = b.data() + run.b_offset + t * run.b_stride;  // cuBLASLt's A is weft's B
      const int64_t* pb = a.data() + run.a_offset + t * run.a_stride;
      const int64_t base = run.c_offset + t * run.c_stride;
      for (int64_t i = 0; i < g.lt_c.rows; ++i)
        for (int64_t j = 0; j < g.lt_c.cols; ++j) {
          int64_t s = 0;
          for (int64_t p = 0; p < op_a_cols; ++p) s += lt_at(g.lt_a, pa, i, p) * lt_at(g.lt_b, pb, p, j);
          const int64_t at = base + i + j * g.lt_c.ld;
          EXPECT_LT(at, out_elements);
          if (at < out_elements) c[static_cast<size_t>(at)] = s;
        }
    }
    next_c = run.c_offset + run.count * run.c_stride;
  }
  return c;
}

std::vector<int64_t> iota_like(const Shape& s, int64_t seed) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<int64_t> v(static_cast<size_t>(s.num_elements()));
  for (auto& x : v) x = static_cast<int64_t>(rng() % 19) - 9;
  return v;
}

struct Case {
  Shape a, b;
};

TEST(MatmulGeometry, MatchesNaiveBatchedProductForEveryTransposeAndBroadcast) {
  const std::vector<Case> cases = {
      {Shape{3, 4}, Shape{4, 5}},         {Shape{1, 1}, Shape{1, 1}},          {Shape{2, 3, 4}, Shape{4, 5}},
      {Shape{2, 3, 4}, Shape{2, 4, 5}},   {Shape{3, 4}, Shape{6, 4, 5}},       {Shape{2, 1, 3, 4}, Shape{1, 3, 4, 5}},
      {Shape{5, 1, 2, 3}, Shape{4, 3, 2}}, {Shape{2, 2, 1, 3, 4}, Shape{2, 1, 4, 5}}, {Shape{7, 1, 4}, Shape{4, 1}},
      {Shape{1, 3, 4}, Shape{3, 4, 5}},   {Shape{4, 2, 3, 4}, Shape{1, 4, 5}}};
  for (const Case& c : cases)
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      // The case's shapes are for no transposes: swap the last two dims of a transposed operand.
      auto swapped = [](const Shape& s) {
        std::vector<int64_t> d(s.begin(), s.end());
        std::swap(d[d.size() - 1], d[d.size() - 2]);
        return Shape(d);
      };
      const Shape as = ta ? swapped(c.a) : c.a, bs = tb ? swapped(c.b) : c.b;
      const Shape os = out_shape(as, bs, ta, tb);
      SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      const auto a = iota_like(as, 1), b = iota_like(bs, 2);
      const GemmGeometry g = matmul_geometry(as, bs, os, ta, tb);
      EXPECT_EQ(as_cublaslt_would(g, os.num_elements(), a, b), naive(as, bs, os, ta, tb, a, b));
    }
}

TEST(MatmulGeometry, FoldsABatchAgainstOneMatrixIntoOneProductAsTheCpuDoes) {
  const GemmGeometry g = matmul_geometry(Shape{60, 28, 28}, Shape{28, 10}, Shape{60, 28, 10}, false, false);
  ASSERT_EQ(g.runs.size(), 1u);
  EXPECT_EQ(g.runs[0].count, 1);
  EXPECT_EQ(g.m, 60 * 28);
  // With transpose_a the rows of the batches are columns of separate matrices: one strided run.
  const GemmGeometry t = matmul_geometry(Shape{60, 28, 28}, Shape{28, 10}, Shape{60, 28, 10}, true, false);
  ASSERT_EQ(t.runs.size(), 1u);
  EXPECT_EQ(t.runs[0].count, 60);
  EXPECT_EQ(t.runs[0].a_stride, 28 * 28);
  EXPECT_EQ(t.runs[0].b_stride, 0);
}

TEST(MatmulGeometry, EmptyBatchesGiveNoRuns) {
  const GemmGeometry g = matmul_geometry(Shape{0, 3, 4}, Shape{4, 5}, Shape{0, 3, 5}, false, false);
  EXPECT_TRUE(g.runs.empty());
}

TEST(MatmulGeometry, FusedFoldsLeadingDimsIntoRows) {
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    const Shape as = ta ? Shape{4, 6} : Shape{2, 3, 4};
    const Shape bs = tb ? Shape{5, 4} : Shape{4, 5};
    const Shape os = ta ? Shape{6, 5} : Shape{2, 3, 5};
    SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    const GemmGeometry g = fused_matmul_geometry(as, bs, os, ta, tb);
    ASSERT_EQ(g.runs.size(), 1u);
    const auto a = iota_like(as, 3), b = iota_like(bs, 4);
    // The naive reference sees the folded A as one matrix.
    const Shape as2 = ta ? as : Shape{6, 4};
    const Shape os2{6, 5};
    EXPECT_EQ(as_cublaslt_would(g, os.num_elements(), a, b), naive(as2, bs, os2, ta, tb, a, b));
  }
}

TEST(MatmulGeometry, GroupsEquallySpacedBatchesIntoRuns) {
  // Offsets of a (2, 3) batch where A broadcasts over the inner dim and B over the outer one.
  const std::vector<int64_t> a_off = {0, 0, 0, 12, 12, 12}, b_off = {0, 20, 40, 0, 20, 40};
  const auto runs = group_runs(a_off, b_off, 15, 1 << 30);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].count, 3);
  EXPECT_EQ(runs[0].a_stride, 0);
  EXPECT_EQ(runs[0].b_stride, 20);
  EXPECT_EQ(runs[1].a_offset, 12);
  EXPECT_EQ(runs[1].c_offset, 45);
  // A step back starts a new run instead of a negative stride.
  const auto back = group_runs({12, 0, 12}, {0, 0, 0}, 1, 1 << 30);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].count, 1);
  EXPECT_EQ(back[0].a_stride, 0);
  EXPECT_EQ(back[1].count, 2);
  EXPECT_EQ(back[1].a_stride, 12);
  // A cap on the batch count splits a run.
  const auto capped = group_runs({0, 1, 2, 3, 4}, {0, 0, 0, 0, 0}, 1, 2);
  ASSERT_EQ(capped.size(), 3u);
  EXPECT_EQ(capped[2].count, 1);
  EXPECT_EQ(capped[2].a_offset, 4);
  EXPECT_EQ(capped[2].a_stride, 0);
}

TEST(MatmulGeometry, AlignmentIsThatOfTheAddressAndTheStride) {
  EXPECT_EQ(alignment_of(0x1000, 0, 1), 256);
  EXPECT_EQ(alignment_of(0x1004, 0, 1), 4);
  EXPECT_EQ(alignment_of(0x1000, 24, 3), 8);
  EXPECT_EQ(alignment_of(0x1000, 24, 1), 256);  // one batch: the stride is never applied
  EXPECT_EQ(alignment_of(0x1000, -16, 2), 16);
  EXPECT_EQ(alignment_of(0x1002, 1024, 2), 2);
}

}  // namespace
}  // namespace weft::cuda
