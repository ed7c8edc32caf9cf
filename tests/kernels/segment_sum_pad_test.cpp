// unsorted_segment_sum and pad against plain reference loops: every dtype each takes, odd and
// empty shapes, sizes that take the parallel paths, and every error family.
#include <cstdint>
#include <limits>
#include <random>

#include "array_test_util.h"

namespace weft {
namespace {

using namespace testing_array;
using Dims = std::vector<int64_t>;

// ---- unsorted_segment_sum ----

// Values that are exact in every dtype tested, drawn from a fixed seed.
template <class T>
std::vector<T> values(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-1000, 1000);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen)) / static_cast<T>(std::is_floating_point_v<T> ? 7 : 1);
  return v;
}

std::vector<int64_t> random_ids(int64_t n, int64_t segments, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, segments - 1);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// out[ids[i], j] += data[i, j], summed in increasing i as the kernel promises, so floats match
// exactly.
template <class T>
std::vector<T> ref_segment_sum(const std::vector<T>& data, const std::vector<int64_t>& ids, int64_t segments) {
  const int64_t inner = ids.empty() ? 0 : static_cast<int64_t>(data.size() / ids.size());
  std::vector<T> out(static_cast<size_t>(segments * inner), T{});
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < inner; ++j) out[ids[i] * inner + j] += data[i * inner + j];
  return out;
}

template <class T>
void check_segment_sum(const Dims& data_dims, int64_t ids_rank, int64_t segments, DType id_dtype, unsigned seed) {
  const Dims id_dims(data_dims.begin(), data_dims.begin() + ids_rank);
  Dims out_dims{segments};
  out_dims.insert(out_dims.end(), data_dims.begin() + ids_rank, data_dims.end());
  const std::vector<T> data = values<T>(count(data_dims), seed);
  const std::vector<int64_t> ids = random_ids(count(id_dims), segments, seed + 1);
  Tensor ids_t = id_dtype == int64 ? constant(ids, Shape(id_dims))
                                   : constant(std::vector<int32_t>(ids.begin(), ids.end()), Shape(id_dims));
  Tensor got = unsorted_segment_sum(constant(data, Shape(data_dims)), ids_t, segments);
  const std::string what = std::string(dtype_name(dtype_v<T>)) + " data " + Shape(data_dims).to_string() +
                           " ids rank " + std::to_string(ids_rank) + " " + std::string(dtype_name(id_dtype)) + ", " +
                           std::to_string(segments) + " segments";
  ASSERT_EQ(got.dtype(), dtype_v<T>) << what;
  ASSERT_EQ(dims_of(got.shape()), out_dims) << what;
  // A rank-0 ids tensor names one row: the whole of data.
  std::vector<int64_t> flat_ids = ids_rank == 0 ? std::vector<int64_t>{ids[0]} : ids;
  EXPECT_EQ(got.to_vector<T>(), ref_segment_sum(data, flat_ids, segments)) << what;
}

TEST(UnsortedSegmentSum, EveryDTypeAndIdDType) {
  for (DType id : {int32, int64}) {
    check_segment_sum<float>({7, 5}, 1, 4, id, 1);
    check_segment_sum<double>({7, 5}, 1, 4, id, 2);
    check_segment_sum<int32_t>({7, 5}, 1, 4, id, 3);
    check_segment_sum<int64_t>({7, 5}, 1, 4, id, 4);
  }
}

TEST(UnsortedSegmentSum, OddShapesAndIdRanks) {
  check_segment_sum<float>({9}, 1, 3, int32, 5);             // scalars into segments
  check_segment_sum<double>({3, 4, 5}, 2, 7, int64, 6);      // 2-D ids, rows of 5
  check_segment_sum<double>({3, 4, 5}, 3, 11, int32, 7);     // ids cover every dim
  check_segment_sum<float>({2, 3, 1, 6}, 1, 1, int64, 8);    // everything into one segment
  check_segment_sum<int32_t>({4, 3}, 0, 5, int32, 9);        // scalar id: data is one row
  check_segment_sum<float>({13, 17}, 1, 40, int32, 10);      // more segments than rows: most stay zero
}

TEST(UnsortedSegmentSum, RepeatedAndUnusedIds) {
  Tensor data = constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}, {7.0, 8.0}});
  Tensor got = unsorted_segment_sum(data, constant({2, 0, 2, 2}), 4);
  EXPECT_EQ(got.to_vector<double>(), (std::vector<double>{3, 4, 0, 0, 13, 16, 0, 0}));
}

TEST(UnsortedSegmentSum, LargeTakesBothParallelPaths) {
  check_segment_sum<float>({300, 2000}, 1, 37, int32, 11);   // wide rows: split by columns
  check_segment_sum<double>({40, 1030}, 1, 3, int64, 12);    // a width not a multiple of a cache line
  check_segment_sum<float>({2000, 40}, 1, 500, int64, 13);   // rows of 40: split by segments
  check_segment_sum<int64_t>({50000}, 1, 7, int32, 14);      // many single elements: one thread
  check_segment_sum<int32_t>({100, 100, 4}, 2, 1000, int32, 15);
  check_segment_sum<float>({30, 2000}, 1, 100, int64, 16);    // wide rows but more segments than rows
}

TEST(UnsortedSegmentSum, Empty) {
  Tensor none = unsorted_segment_sum(zeros({0, 3}), constant(std::vector<int32_t>{}, Shape{0}), 4);
  EXPECT_EQ(dims_of(none.shape()), (Dims{4, 3}));
  EXPECT_EQ(none.to_vector<float>(), std::vector<float>(12, 0.f));
  Tensor no_segments = unsorted_segment_sum(zeros({0, 3}), constant(std::vector<int64_t>{}, Shape{0}), 0);
  EXPECT_EQ(dims_of(no_segments.shape()), (Dims{0, 3}));
  Tensor no_columns = unsorted_segment_sum(zeros({2, 0}), constant({1, 1}), 3);
  EXPECT_EQ(dims_of(no_columns.shape()), (Dims{3, 0}));
}

TEST(UnsortedSegmentSum, IntegerSumsWrap) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  Tensor got = unsorted_segment_sum(constant(std::vector<int32_t>{big, 1}, Shape{2}), constant({0, 0}), 1);
  EXPECT_EQ(got.item<int32_t>(), std::numeric_limits<int32_t>::min());
}

TEST(UnsortedSegmentSum, IdsOutOfRangeNameTheIndex) {
  Tensor data = zeros({2, 3});
  expect_invalid([&] { unsorted_segment_sum(data, constant({{0, 1, 2}, {3, 4, 1}}), 4); },
                 {"[unsorted_segment_sum]", "segment_ids[1, 1] = 4", "[0, 4)"});
  expect_invalid([&] { unsorted_segment_sum(data, constant({{0, 1, 2}, {-1, 0, 0}}), 4); },
                 {"segment_ids[1, 0] = -1", "out of range"});
  expect_invalid([&] { unsorted_segment_sum(zeros({3}), constant(std::vector<int64_t>{0, 9, 0}, Shape{3}), 2); },
                 {"segment_ids[1] = 9"});
  expect_invalid([&] { unsorted_segment_sum(zeros({3}), constant({0, 0, 0}), 0); }, {"segment_ids[0] = 0"});
}

TEST(UnsortedSegmentSum, BadArguments) {
  expect_invalid([] { unsorted_segment_sum(zeros({3, 2}), constant({0, 1}), 2); },
                 {"[unsorted_segment_sum]", "prefix", "(2,)", "(3, 2)"});
  expect_invalid([] { unsorted_segment_sum(zeros({3}), constant({{0, 1, 2}}), 3); }, {"prefix"});
  expect_invalid([] { unsorted_segment_sum(zeros({3}), constant({0.f, 1.f, 2.f}), 3); },
                 {"segment_ids must be int32 or int64", "float32"});
  expect_invalid([] { unsorted_segment_sum(zeros({3}, bool_), constant({0, 1, 2}), 3); }, {"bool"});
  expect_invalid([] { unsorted_segment_sum(zeros({3}, float16), constant({0, 1, 2}), 3); }, {"float16"});
  expect_invalid([] { unsorted_segment_sum(zeros({3}), constant({0, 1, 2}), -1); }, {"num_segments", "-1"});
}

// ---- pad ----

void check_pad(DType dt, const Dims& in_dims, const std::vector<std::pair<int64_t, int64_t>>& p) {
  Tensor x = patterned(dt, Shape(in_dims), 3);
  Dims out_dims;
  for (size_t k = 0; k < in_dims.size(); ++k) out_dims.push_back(p[k].first + in_dims[k] + p[k].second);
  const size_t w = dtype_size(dt);
  const std::vector<unsigned char> ib = bytes_of(x);
  std::vector<unsigned char> want(static_cast<size_t>(count(out_dims)) * w, 0);
  for (int64_t o = 0; o < count(out_dims); ++o) {
    Dims idx = unravel(o, out_dims);
    bool inside = true;
    for (size_t k = 0; k < idx.size(); ++k) {
      idx[k] -= p[k].first;
      inside &= idx[k] >= 0 && idx[k] < in_dims[k];
    }
    if (inside)
      for (size_t b = 0; b < w; ++b) want[o * w + b] = ib[ravel(idx, in_dims) * w + b];
  }
  std::string what = std::string(dtype_name(dt)) + " " + Shape(in_dims).to_string() + " paddings";
  for (auto [b, a] : p) what += " (" + std::to_string(b) + ", " + std::to_string(a) + ")";
  expect_bytes(pad(x, p), dt, out_dims, want, what);
}

TEST(Pad, EveryDTypeOddShapes) {
  for (DType dt : kAllDTypes) {
    check_pad(dt, {3, 5}, {{1, 2}, {0, 3}});
    check_pad(dt, {7}, {{4, 0}});
    check_pad(dt, {2, 3, 4}, {{0, 0}, {1, 1}, {0, 0}});  // inner dims unpadded: merged into long runs
    check_pad(dt, {2, 3, 4}, {{1, 0}, {0, 0}, {0, 0}});  // only the outermost dim: one row
  }
}

TEST(Pad, RanksAndPatterns) {
  check_pad(float32, {}, {});
  check_pad(float32, {3, 4}, {{0, 0}, {0, 0}});            // no padding: a copy
  check_pad(int8, {1, 1, 1, 1}, {{1, 1}, {2, 0}, {0, 2}, {1, 1}});
  check_pad(float64, {2, 1, 3, 2}, {{0, 1}, {3, 0}, {0, 0}, {1, 0}});
  check_pad(bool_, {5, 1}, {{0, 0}, {2, 2}});
}

TEST(Pad, EmptyInputOrOutput) {
  check_pad(float32, {0, 3}, {{1, 1}, {0, 2}});            // all padding
  check_pad(float16, {2, 0}, {{0, 0}, {2, 1}});
  check_pad(int32, {0, 3}, {{0, 0}, {1, 1}});              // empty output
  check_pad(int64, {4, 0, 2}, {{0, 0}, {0, 0}, {3, 3}});
}

TEST(Pad, LargeTakesParallelPaths) {
  check_pad(float32, {300, 500}, {{2, 3}, {1, 7}});        // many rows
  check_pad(uint8, {100000, 1}, {{0, 0}, {1, 2}});         // many tiny rows
  check_pad(float64, {1, 200000}, {{5, 5}, {0, 0}});       // one long run
  check_pad(bfloat16, {20, 30, 40}, {{1, 1}, {0, 0}, {0, 0}});
}

TEST(Pad, TwoListForm) {
  Tensor x = constant({{1, 2}, {3, 4}});
  Tensor got = pad(x, Dims{1, 0}, Dims{0, 1});
  EXPECT_EQ(dims_of(got.shape()), (Dims{3, 3}));
  EXPECT_EQ(got.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
}

TEST(Pad, BadArguments) {
  Tensor x = zeros({2, 3});
  expect_invalid([&] { pad(x, {{1, 1}}); }, {"[pad]", "(2, 3)", "4 numbers, got 2"});
  expect_invalid([&] { pad(x, {{1, 1}, {0, 0}, {0, 0}}); }, {"4 numbers, got 6"});
  expect_invalid([&] { pad(x, {{0, 0}, {-1, 2}}); }, {"[pad]", ">= 0", "(-1, 2)", "dim 1"});
  expect_invalid([&] { pad(x, {{0, -3}, {0, 0}}); }, {"(0, -3)", "dim 0"});
  expect_invalid([&] { pad(x, Dims{1, 1}, Dims{1}); }, {"[pad]", "before has 2", "after has 1"});
  expect_invalid([&] { pad(x, {{0, 0}, {std::numeric_limits<int64_t>::max(), 0}}); }, {"overflows"});
}

}  // namespace
}  // namespace weft
