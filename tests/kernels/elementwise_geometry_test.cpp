// The host-side geometry of the CUDA elementwise kernels (kernels/cuda/elementwise_geometry.h):
// plain C++, so it is checked here on every build, GPU or not.
#include "kernels/cuda/elementwise_geometry.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/error.h"

namespace weft::cuda {
namespace {

// NumPy's rule, index by index: the input element output element `flat` reads.
int64_t naive_offset(const Shape& out, const Shape& in, int64_t flat) {
  std::vector<int64_t> idx(out.rank());
  for (int64_t d = out.rank() - 1; d >= 0; --d) {
    idx[d] = flat % out[d];
    flat /= out[d];
  }
  int64_t off = 0;
  for (int64_t j = 0; j < in.rank(); ++j) {
    const int64_t d = j + (out.rank() - in.rank());
    off = off * in[j] + (in[j] == 1 ? 0 : idx[d]);
  }
  return off;
}

void expect_offsets_match(const Shape& out, const std::vector<Shape>& ins) {
  BroadcastStrides g = ins.size() == 1   ? broadcast_strides(out, {&ins[0]}, "test")
                       : ins.size() == 2 ? broadcast_strides(out, {&ins[0], &ins[1]}, "test")
                                         : broadcast_strides(out, {&ins[0], &ins[1], &ins[2]}, "test");
  ASSERT_EQ(g.num_inputs, static_cast<int>(ins.size()));
  ASSERT_EQ(g.n, out.num_elements());
  int64_t product = 1;
  for (int d = 0; d < g.rank; ++d) product *= g.dims[d];
  ASSERT_EQ(product, g.n == 0 ? 0 : g.n) << "merged dims must keep the element count";
  bool same = true;
  for (const Shape& s : ins) same = same && s.num_elements() == out.num_elements();
  EXPECT_EQ(g.same_shape, same);
  for (size_t k = 0; k < ins.size(); ++k)
    for (int64_t i = 0; i < g.n; ++i)
      ASSERT_EQ(broadcast_offset(g, static_cast<int>(k), i), naive_offset(out, ins[k], i))
          << "input " << k << " " << ins[k].to_string() << " -> " << out.to_string() << " at " << i;
}

TEST(ElementwiseGeometry, SameShapeMergesToOneContiguousDim) {
  Shape s{3, 4, 5};
  BroadcastStrides g = broadcast_strides(s, {&s, &s}, "add");
  EXPECT_TRUE(g.same_shape);
  ASSERT_EQ(g.rank, 1);
  EXPECT_EQ(g.dims[0], 60);
  EXPECT_EQ(g.strides[0][0], 1);
  EXPECT_EQ(g.strides[1][0], 1);
  EXPECT_TRUE(g.index32);
}

TEST(ElementwiseGeometry, RowAndColumnBroadcasts) {
  Shape out{6, 7}, row{7}, col{6, 1}, full{6, 7};
  BroadcastStrides r = broadcast_strides(out, {&full, &row}, "add");
  ASSERT_EQ(r.rank, 2);
  EXPECT_EQ(r.dims[0], 6);
  EXPECT_EQ(r.dims[1], 7);
  EXPECT_EQ(r.strides[0][0], 7);
  EXPECT_EQ(r.strides[0][1], 1);
  EXPECT_EQ(r.strides[1][0], 0);
  EXPECT_EQ(r.strides[1][1], 1);
  EXPECT_FALSE(r.same_shape);
  BroadcastStrides c = broadcast_strides(out, {&full, &col}, "add");
  ASSERT_EQ(c.rank, 2);
  EXPECT_EQ(c.strides[1][0], 1);
  EXPECT_EQ(c.strides[1][1], 0);
  expect_offsets_match(out, {full, row});
  expect_offsets_match(out, {col, row});
}

TEST(ElementwiseGeometry, ScalarsAndUnitDims) {
  Shape scalar{};
  BroadcastStrides g = broadcast_strides(scalar, {&scalar, &scalar}, "add");
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.dims[0], 1);
  EXPECT_EQ(g.n, 1);
  EXPECT_TRUE(g.same_shape);
  expect_offsets_match(Shape{5}, {Shape{}, Shape{5}});
  expect_offsets_match(Shape{1, 5, 1}, {Shape{1, 1, 1}, Shape{5, 1}});
  // A scalar against a tensor: one merged dim, the scalar's stride 0.
  Shape matrix{4, 5};
  BroadcastStrides s = broadcast_strides(matrix, {&scalar, &matrix}, "mul");
  ASSERT_EQ(s.rank, 1);
  EXPECT_EQ(s.strides[0][0], 0);
  EXPECT_EQ(s.strides[1][0], 1);
}

TEST(ElementwiseGeometry, EmptyOutputs) {
  Shape out{0, 3}, a{0, 3}, b{3};
  BroadcastStrides g = broadcast_strides(out, {&a, &b}, "add");
  EXPECT_EQ(g.n, 0);
  EXPECT_EQ(launch_geometry(g.n).blocks, 0u);
  expect_offsets_match(Shape{2, 0}, {Shape{2, 1}, Shape{0}});
}

TEST(ElementwiseGeometry, ThreeInputsForSelect) {
  expect_offsets_match(Shape{4, 3, 5}, {Shape{3, 1}, Shape{4, 1, 5}, Shape{5}});
  expect_offsets_match(Shape{2, 3}, {Shape{}, Shape{2, 3}, Shape{1, 3}});
}

TEST(ElementwiseGeometry, RandomShapesMatchNumPyIndexing) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = static_cast<int>(rng() % 6);
    std::vector<int64_t> dims(rank);
    for (int64_t& d : dims) d = 1 + rng() % 4;
    Shape out(dims);
    std::vector<Shape> ins;
    const int k_count = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < k_count; ++k) {
      const int drop = rank ? static_cast<int>(rng() % (rank + 1)) : 0;  // fewer leading dims
      std::vector<int64_t> in(dims.begin() + drop, dims.end());
      for (int64_t& d : in)
        if (rng() % 3 == 0) d = 1;
      ins.push_back(Shape(in));
    }
    expect_offsets_match(out, ins);
  }
}

TEST(ElementwiseGeometry, MergesWhatItCan) {
  // (2,3,4,5) + (2,3,1,1): the first two dims merge, and so do the last two.
  Shape full{2, 3, 4, 5}, outer{2, 3, 1, 1};
  BroadcastStrides g = broadcast_strides(full, {&full, &outer}, "add");
  ASSERT_EQ(g.rank, 2);
  EXPECT_EQ(g.dims[0], 6);
  EXPECT_EQ(g.dims[1], 20);
  EXPECT_EQ(g.strides[1][0], 1);
  EXPECT_EQ(g.strides[1][1], 0);
}

TEST(ElementwiseGeometry, Index32OnlyBelowTwoToThe31) {
  Shape two_dims{int64_t{1} << 30, 2};  // 2^31 elements: one too many
  Shape at{int64_t{1} << 31};
  EXPECT_FALSE(broadcast_strides(two_dims, {&two_dims}, "add").index32);
  EXPECT_FALSE(broadcast_strides(at, {&at}, "add").index32);
  Shape just_below{(int64_t{1} << 31) - 1};
  EXPECT_TRUE(broadcast_strides(just_below, {&just_below}, "add").index32);
}

TEST(ElementwiseGeometry, RefusesWhatItCannotDo) {
  Shape out{3, 4}, bad{5}, too_long{2, 3, 4};
  EXPECT_THROW(broadcast_strides(out, {&bad}, "add"), InvalidArgument);
  EXPECT_THROW(broadcast_strides(out, {&too_long}, "add"), InvalidArgument);
  EXPECT_THROW(broadcast_strides(out, {&out, &out, &out, &out}, "add"), InvalidArgument);
  // Alternating broadcast dims cannot merge: nine of them are more than the kernels take.
  Shape big{2, 2, 2, 2, 2, 2, 2, 2, 2}, alternating{2, 1, 2, 1, 2, 1, 2, 1, 2};
  try {
    broadcast_strides(big, {&big, &alternating}, "add");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[add]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at most 8 dims"), std::string::npos) << e.what();
  }
  // Eight such dims are fine.
  Shape eight{2, 2, 2, 2, 2, 2, 2, 2}, alt8{2, 1, 2, 1, 2, 1, 2, 1};
  expect_offsets_match(eight, {eight, alt8});
}

TEST(ElementwiseGeometry, LaunchGeometry) {
  EXPECT_EQ(launch_geometry(0).blocks, 0u);
  EXPECT_EQ(launch_geometry(-1).blocks, 0u);
  EXPECT_EQ(launch_geometry(1).blocks, 1u);
  EXPECT_EQ(launch_geometry(1).threads, kElementwiseThreads);
  EXPECT_EQ(launch_geometry(256).blocks, 1u);
  EXPECT_EQ(launch_geometry(257).blocks, 2u);
  EXPECT_EQ(launch_geometry(int64_t{256} * 65535).blocks, 65535u);
  EXPECT_EQ(launch_geometry(int64_t{1} << 40).blocks, kMaxElementwiseBlocks);
  // The 32-bit kernel's loop bound: index + grid stride never wraps for n < 2^31.
  const uint64_t stride = uint64_t{kMaxElementwiseBlocks} * kElementwiseThreads;
  EXPECT_LT(uint64_t{(uint64_t{1} << 31) - 1} + stride, uint64_t{1} << 32);
}

}  // namespace
}  // namespace weft::cuda
