// The copying array ops (transpose, concat, slice, gather, one_hot) against naive references, for
// every dtype, odd sizes, ranks 0 to 4, negative axes, sizes that take the parallel paths, and
// every error family.
#include <algorithm>
#include <numeric>

#include "array_test_util.h"

namespace weft {
namespace {

using namespace testing_array;
using Dims = std::vector<int64_t>;

std::string str(const Dims& d) {
  std::string s;
  for (int64_t v : d) s += std::to_string(v) + " ";
  return s;
}

// ---- transpose ----

void check_transpose(DType dt, const Shape& shape, const Dims& perm) {
  Tensor x = patterned(dt, shape);
  Dims full = perm;
  if (full.empty())
    for (int64_t i = shape.rank() - 1; i >= 0; --i) full.push_back(i);
  Dims norm = full;
  for (int64_t& p : norm)
    if (p < 0) p += shape.rank();
  Dims out_dims;
  auto want = ref_transpose(x, norm, &out_dims);
  expect_bytes(transpose(x, perm), dt, out_dims, want,
               std::string(dtype_name(dt)) + " " + shape.to_string() + " perm " + str(perm));
}

TEST(Transpose, MatricesOfOddSizesEveryDType) {
  for (DType dt : kAllDTypes)
    for (Shape s : {Shape{33, 17}, Shape{1, 7}, Shape{7, 1}, Shape{1, 1}, Shape{2, 3}, Shape{64, 64}, Shape{31, 65}})
      check_transpose(dt, s, {});
}

TEST(Transpose, Rank0And1) {
  check_transpose(float32, Shape{}, {});
  check_transpose(float32, Shape{7}, {});
  check_transpose(int8, Shape{7}, {0});
  check_transpose(float64, Shape{7}, {-1});
}

TEST(Transpose, EveryPermOfRank3And4) {
  for (DType dt : {float32, int8, float16, int64}) {
    Dims p3 = {0, 1, 2};
    do check_transpose(dt, {5, 7, 3}, p3);
    while (std::next_permutation(p3.begin(), p3.end()));
    for (Shape s : {Shape{2, 3, 4, 5}, Shape{3, 1, 4, 5}, Shape{1, 6, 1, 9}}) {
      Dims p4 = {0, 1, 2, 3};
      do check_transpose(dt, s, p4);
      while (std::next_permutation(p4.begin(), p4.end()));
    }
  }
}

TEST(Transpose, NegativePermEntries) {
  check_transpose(float32, {4, 5, 6}, {-1, 0, -2});
  check_transpose(int32, {4, 5}, {-1, -2});
}

TEST(Transpose, LargeTakesParallelTiledPaths) {
  check_transpose(float32, {300, 257}, {});        // many tiles
  check_transpose(uint8, {1000, 3}, {});           // narrow: long tiles
  check_transpose(int64, {3, 1000}, {});
  check_transpose(float32, {8, 64, 33, 17}, {0, 2, 3, 1});  // NCHW -> NHWC
  check_transpose(bfloat16, {40, 50, 60}, {1, 0, 2});  // rows stay contiguous
  check_transpose(float64, {16, 3, 40, 50}, {3, 1, 2, 0});
}

TEST(Transpose, EmptyTensor) {
  Tensor y = transpose(zeros({0, 3}));
  EXPECT_EQ(dims_of(y.shape()), (Dims{3, 0}));
}

TEST(Transpose, KnownValues) {
  Tensor y = transpose(constant({{1, 2, 3}, {4, 5, 6}}));
  EXPECT_EQ(dims_of(y.shape()), (Dims{3, 2}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST(Transpose, BadPerm) {
  Tensor x = zeros({2, 3, 4});
  expect_invalid([&] { transpose(x, {1, 0}); }, {"[transpose]", "perm [1, 0]", "rank 3", "(2, 3, 4)"});
  expect_invalid([&] { transpose(x, {0, 1, 1}); }, {"[transpose]", "twice"});
  expect_invalid([&] { transpose(x, {0, 1, 3}); }, {"[transpose]", "axis 3", "out of range"});
  expect_invalid([&] { transpose(x, {0, 1, -4}); }, {"[transpose]", "axis -4"});
  expect_invalid([&] { transpose(x, {0, 2, -1}); }, {"[transpose]", "twice"});
}

// ---- concat ----

void check_concat(DType dt, const std::vector<Shape>& shapes, int64_t axis) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(patterned(dt, shapes[i], static_cast<int>(i) * 1000));
  const int64_t a = axis < 0 ? axis + shapes[0].rank() : axis;
  Dims out_dims;
  auto want = ref_concat(xs, a, &out_dims);
  expect_bytes(concat(xs, axis), dt, out_dims, want,
               std::string(dtype_name(dt)) + " " + shapes[0].to_string() + " axis " + std::to_string(axis));
}

TEST(Concat, EveryAxisOfRanks1To4EveryDType) {
  for (DType dt : kAllDTypes) {
    check_concat(dt, {{7}, {1}, {33}}, 0);
    check_concat(dt, {{33, 17}, {2, 17}}, 0);
    check_concat(dt, {{33, 17}, {33, 1}, {33, 5}}, 1);
    check_concat(dt, {{33, 17}, {33, 3}}, -1);
    for (int64_t axis = -3; axis < 3; ++axis) {
      std::vector<Shape> s = {{3, 4, 5}, {3, 4, 5}};
      s[1][axis < 0 ? axis + 3 : axis] = 2;
      check_concat(dt, s, axis);
    }
  }
  for (int64_t axis = 0; axis < 4; ++axis) {
    std::vector<Shape> s = {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}};
    s[0][axis] = 1;
    s[2][axis] = 3;
    check_concat(float32, s, axis);
  }
}

TEST(Concat, EmptyPiecesSingleInputAndMany) {
  check_concat(float32, {{3, 0}, {3, 4}, {3, 0}, {3, 2}}, 1);
  check_concat(int32, {{0, 5}, {0, 5}}, 0);
  check_concat(int8, {{3, 5}}, 1);
  std::vector<Shape> many;
  for (int i = 0; i < 50; ++i) many.push_back({2, i % 4, 3});
  check_concat(float64, many, 1);
  Tensor e = concat({zeros({2, 0}), zeros({2, 0})}, 1);
  EXPECT_EQ(dims_of(e.shape()), (Dims{2, 0}));
}

TEST(Concat, LargeTakesParallelPath) {
  check_concat(float32, {{300, 1000}, {200, 1000}}, 0);  // few huge segments
  check_concat(float32, {{1000, 300}, {1000, 7}}, 1);    // many rows
  check_concat(uint8, {{1, 1 << 19}, {1, 1 << 18}}, 1);  // one row split across threads
}

TEST(Concat, KnownValues) {
  Tensor y = concat({constant({{1, 2}}), constant({{3, 4}, {5, 6}})}, 0);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Tensor z = concat({constant({{1}, {2}}), constant({{3, 4}, {5, 6}})}, -1);
  EXPECT_EQ(z.to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 4, 2, 5, 6}));
}

TEST(Concat, Errors) {
  expect_invalid([] { concat({}, 0); }, {"[concat]", "at least one"});
  expect_invalid([] { concat({zeros({2, 3}), zeros({2})}, 0); }, {"[concat]", "same rank", "(2, 3)", "(2,)"});
  expect_invalid([] { concat({zeros({2, 3}), zeros({2, 3}, int32)}, 0); },
                 {"[concat]", "float32", "int32", "(2, 3)"});
  expect_invalid([] { concat({zeros({2, 3}), zeros({3, 3})}, 1); },
                 {"[concat]", "dim 0", "(2, 3)", "(3, 3)", "not the concat axis"});
  expect_invalid([] { concat({zeros({2, 3}), zeros({2, 3})}, 2); }, {"[concat]", "axis 2", "rank 2"});
  expect_invalid([] { concat({zeros({2, 3}), zeros({2, 3})}, -3); }, {"[concat]", "axis -3"});
  expect_invalid([] { concat({constant(1.f), constant(2.f)}, 0); }, {"[concat]", "scalars"});
}

// ---- slice ----

void check_slice(DType dt, const Shape& shape, const Dims& begin, const Dims& size) {
  Tensor x = patterned(dt, shape);
  Dims resolved = size;
  for (size_t i = 0; i < size.size(); ++i)
    if (size[i] == -1) resolved[i] = shape[static_cast<int64_t>(i)] - begin[i];
  auto want = ref_slice(x, begin, resolved);
  expect_bytes(slice(x, begin, size), dt, resolved, want,
               std::string(dtype_name(dt)) + " " + shape.to_string() + " begin " + str(begin) + " size " + str(size));
}

TEST(Slice, RanksZeroToFourEveryDType) {
  for (DType dt : kAllDTypes) {
    check_slice(dt, Shape{}, {}, {});
    check_slice(dt, {7}, {2}, {3});
    check_slice(dt, {7}, {0}, {-1});
    check_slice(dt, {33, 17}, {5, 3}, {20, 11});
    check_slice(dt, {33, 17}, {5, 0}, {-1, -1});
    check_slice(dt, {33, 17}, {32, 16}, {1, 1});
    check_slice(dt, {4, 5, 6}, {1, 0, 0}, {2, 5, 6});  // inner dims whole: one run
    check_slice(dt, {4, 5, 6}, {0, 1, 2}, {4, 3, 3});
    check_slice(dt, {3, 4, 5, 6}, {1, 1, 0, 2}, {2, -1, 5, 1});
  }
}

TEST(Slice, ExhaustiveSmallRank3) {
  const Shape s{3, 2, 4};
  for (int64_t b0 = 0; b0 <= 3; ++b0)
    for (int64_t b1 = 0; b1 <= 2; ++b1)
      for (int64_t b2 = 0; b2 <= 4; ++b2)
        for (int64_t z0 : {int64_t{-1}, 3 - b0})
          for (int64_t z1 = 0; z1 <= 2 - b1; ++z1)
            for (int64_t z2 : {int64_t{0}, (4 - b2) / 2, int64_t{-1}})
              check_slice(float16, s, {b0, b1, b2}, {z0, z1, z2});
}

TEST(Slice, EmptyAndLarge) {
  check_slice(float32, {5, 6}, {5, 2}, {0, 3});
  check_slice(float32, {5, 6}, {1, 6}, {3, -1});
  check_slice(float32, {1000, 600}, {100, 0}, {700, 600});     // one big run
  check_slice(float32, {1000, 600}, {100, 30}, {700, 500});    // many rows
  check_slice(int8, {64, 64, 64}, {1, 2, 3}, {60, 60, 60});
}

TEST(Slice, Errors) {
  Tensor x = zeros({4, 5});
  expect_invalid([&] { slice(x, {0}, {1, 1}); }, {"[slice]", "one entry per dim", "(4, 5)"});
  expect_invalid([&] { slice(x, {-1, 0}, {1, 1}); }, {"[slice]", "begin[0] = -1", "negative"});
  expect_invalid([&] { slice(x, {5, 0}, {0, 1}); }, {"[slice]", "begin[0] = 5", "out of bounds", "(4, 5)"});
  expect_invalid([&] { slice(x, {1, 2}, {2, 4}); }, {"[slice]", "= 6", "exceeds", "dim 1", "(4, 5)"});
  expect_invalid([&] { slice(x, {1, 2}, {2, -2}); }, {"[slice]", "size[1] = -2"});
}

// ---- gather ----

void check_gather(DType dt, const Shape& shape, const Dims& idx, const Dims& idx_dims, int64_t axis, DType idt) {
  Tensor p = patterned(dt, shape);
  Tensor i = idt == int64 ? constant(idx, Shape(idx_dims))
                          : constant(std::vector<int32_t>(idx.begin(), idx.end()), Shape(idx_dims));
  Dims out_dims;
  auto want = ref_gather(p, idx, idx_dims, axis < 0 ? axis + shape.rank() : axis, &out_dims);
  expect_bytes(gather(p, i, axis), dt, out_dims, want,
               std::string(dtype_name(dt)) + " " + shape.to_string() + " axis " + std::to_string(axis));
}

TEST(Gather, AxesIndexRanksAndDTypes) {
  for (DType dt : kAllDTypes)
    for (DType idt : {int32, int64}) {
      check_gather(dt, {7, 3}, {6, 0, 0, 3}, {4}, 0, idt);
      check_gather(dt, {7, 3}, {2}, {}, 0, idt);  // scalar index drops the axis
      check_gather(dt, {7, 3}, {2, 1, 2, 0, 0, 1}, {2, 3}, 1, idt);
      check_gather(dt, {7, 3}, {1, 1}, {2}, -1, idt);  // single elements
      check_gather(dt, {2, 5, 3, 4}, {4, 0, 2}, {3}, 1, idt);
      check_gather(dt, {2, 5, 3, 4}, {3, 0, 1, 2}, {2, 2}, -1, idt);
      check_gather(dt, {33}, {32, 0, 16}, {3}, 0, idt);
    }
}

TEST(Gather, EmptyAndLarge) {
  check_gather(float32, {7, 3}, {}, {0}, 0, int32);
  check_gather(float32, {0, 3}, {}, {0}, 0, int64);
  Dims many(5000);
  for (size_t k = 0; k < many.size(); ++k) many[k] = static_cast<int64_t>((k * 7919) % 1000);
  check_gather(float32, {1000, 64}, many, {5000}, 0, int64);
  check_gather(float32, {64, 1000}, many, {100, 50}, 1, int32);
}

TEST(Gather, KnownValues) {
  Tensor y = gather(constant({{1, 2}, {3, 4}, {5, 6}}), constant({2, 0}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{5, 6, 1, 2}));
}

TEST(Gather, Errors) {
  Tensor p = zeros({5, 2});
  expect_invalid([&] { gather(p, constant({1.f})); }, {"[gather]", "int32 or int64", "float32"});
  expect_invalid([&] { gather(p, constant({1}), 2); }, {"[gather]", "axis 2"});
  expect_invalid([&] { gather(p, constant({1}), -3); }, {"[gather]", "axis -3"});
  expect_invalid([&] { gather(constant(1.f), constant({0})); }, {"[gather]", "rank >= 1"});
  expect_invalid([&] { gather(p, constant({0, 1, 7})); }, {"[gather]", "indices[2] = 7", "[0, 5)", "(5, 2)"});
  expect_invalid([&] { gather(p, constant({{0, 1}, {-1, 2}})); }, {"[gather]", "indices[1, 0] = -1", "[0, 5)"});
  expect_invalid([&] { gather(p, constant({int64_t{2}}), 1); }, {"[gather]", "= 2", "[0, 2)"});
  expect_invalid([&] { gather(zeros({0, 2}), constant({0})); }, {"[gather]", "[0, 0)"});
}

// ---- one_hot ----

template <class I>
void check_one_hot(const std::vector<I>& idx, const Shape& shape, int64_t depth) {
  Tensor y = one_hot(constant(idx, shape), depth);
  Dims want_dims = dims_of(shape);
  want_dims.push_back(depth);
  ASSERT_EQ(y.dtype(), float32);
  ASSERT_EQ(dims_of(y.shape()), want_dims);
  std::vector<float> want(idx.size() * static_cast<size_t>(depth), 0.f);
  for (size_t j = 0; j < idx.size(); ++j)
    for (int64_t d = 0; d < depth; ++d)
      if (static_cast<int64_t>(idx[j]) == d) want[j * depth + d] = 1.f;
  EXPECT_EQ(y.to_vector<float>(), want) << dtype_name(dtype_v<I>) << " depth " << depth;
}

TEST(OneHot, IntegerDTypesAndOutOfRangeRows) {
  check_one_hot<int32_t>({0, 2, 1, 5, -1, 4}, {6}, 5);
  check_one_hot<int64_t>({0, 2, 1, 5, -1, 4}, {2, 3}, 5);
  check_one_hot<int8_t>({3, -3, 0}, {3}, 4);
  check_one_hot<uint8_t>({3, 255, 0, 1}, {2, 2}, 4);
  check_one_hot<int32_t>({3}, {}, 7);  // scalar index: one vector
  check_one_hot<int32_t>({1, 2}, {2}, 0);
  check_one_hot<int64_t>({}, {0}, 3);
  std::vector<int32_t> big(5000);
  for (size_t k = 0; k < big.size(); ++k) big[k] = static_cast<int32_t>(k % 37) - 2;
  check_one_hot<int32_t>(big, {50, 100}, 33);
}

TEST(OneHot, Errors) {
  expect_invalid([] { one_hot(constant({1, 2}), -1); }, {"[one_hot]", "depth", "-1"});
  expect_invalid([] { one_hot(constant({1.f, 2.f}), 3); }, {"[one_hot]", "integer", "float32"});
  expect_invalid([] { one_hot(constant(std::vector<bool>{true}, Shape{1}), 3); }, {"[one_hot]", "bool"});
}

}  // namespace
}  // namespace weft
