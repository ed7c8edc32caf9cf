// The CUDA kernels of Transpose, Slice, Split, ConcatV2 and Pad against the CPU kernels, for all nine
// dtypes on random bit patterns: they move bits only, so the results must be byte-identical.
// Shapes cover empty tensors, scalars, size-1 dims, sizes that are not multiples of the tile and
// large tensors, and every path of each kernel (plain copy, tiled, strided).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace weft::gpu_test {
namespace {

constexpr DType kAllDTypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}


struct TransposeCase {
  Shape shape;
  std::vector<int64_t> perm;
};

Shape transposed(const Shape& s, std::vector<int64_t> perm) {
  const int64_t r = s.rank();
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(s[p < 0 ? p + r : p]);
  return Shape(out);
}

TEST(CudaTranspose, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<TransposeCase> cases = {
      {Shape{1031, 517}, {1, 0}},              // tiled, ragged tiles on both edges
      {Shape{64, 64}, {1, 0}},                 // tiled, exact tiles
      {Shape{2, 3, 4, 5}, {0, 2, 3, 1}},       // NCHW -> NHWC: batched tiles
      {Shape{2, 3, 4, 5}, {0, 3, 1, 2}},       // NHWC -> NCHW
      {Shape{33, 65, 31}, {0, 2, 1}},
      {Shape{1, 40, 1, 70}, {3, 2, 1, 0}},     // size-1 dims dropped, then a matrix
      {Shape{5, 7, 9}, {2, 1, 0}},             // strided
      {Shape{3, 4, 5}, {1, 0, 2}},             // strided, inner dim in place
      {Shape{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}}, // strided, rank 5
      {Shape{2, 3, 4}, {-1, 0, 1}},            // negative axis
      {Shape{6, 7}, {}},                       // default perm: reversed
      {Shape{2, 3, 4}, {0, 1, 2}},             // identity: a copy
      {Shape{0, 3}, {1, 0}},                   // empty
      {Shape{}, {}},                           // scalar
      {Shape{1, 1}, {1, 0}},
      {Shape{7}, {0}},
      {Shape{2049, 4099}, {1, 0}},             // large
      {Shape{300, 200, 3}, {2, 0, 1}},
  };
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    for (const TransposeCase& c : cases) {
      // The large case once per width is enough.
      if (c.shape.num_elements() > (1 << 20) && dt != float32 && dt != float64 && dt != uint8 && dt != float16) continue;
      Tensor x = random_tensor(dt, c.shape, seed++, Values::kAllBits);
      Attrs attrs;
      if (!c.perm.empty()) attrs = Attrs{{"perm", c.perm}};
      expect_same_bits("Transpose", {x}, dt, transposed(c.shape, c.perm), attrs,
                       std::string(dtype_name(dt)) + " " + c.shape.to_string() + " perm " + list(c.perm));
    }
  }
}

struct SliceCase {
  Shape shape;
  std::vector<int64_t> begin, size;
};

TEST(CudaSlice, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<SliceCase> cases = {
      {Shape{10}, {3}, {5}},
      {Shape{4, 5, 6}, {1, 2, 3}, {2, 3, 3}},
      {Shape{4, 5, 6}, {0, 0, 0}, {4, 5, 6}},    // everything: one run
      {Shape{4, 5, 6}, {1, 0, 0}, {2, 5, 6}},    // whole rows: one run
      {Shape{4, 5, 6}, {0, 2, 0}, {4, 0, 6}},    // empty
      {Shape{}, {}, {}},                         // scalar
      {Shape{1000, 1000}, {3, 5}, {990, 7}},     // narrow columns of a large matrix
      {Shape{3, 1, 4}, {1, 0, 2}, {1, 1, 2}},
      {Shape{2, 3, 4, 5}, {1, 1, 1, 1}, {1, 2, 3, 4}},
      {Shape{1 << 22}, {17}, {(1 << 22) - 40}},  // a long run at an odd offset
  };
  uint64_t seed = 100;
  for (DType dt : kAllDTypes) {
    for (const SliceCase& c : cases) {
      Tensor x = random_tensor(dt, c.shape, seed++, Values::kAllBits);
      expect_same_bits("Slice", {x}, dt, Shape(c.size), Attrs{{"begin", c.begin}, {"size", c.size}},
                       std::string(dtype_name(dt)) + " " + c.shape.to_string() + " begin " + list(c.begin) +
                           " size " + list(c.size));
    }
  }
}

// Split: every part, for each axis (contiguous blocks, strided windows, an empty dim, one part).
TEST(CudaSplit, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  struct SplitCase {
    Shape shape;
    int64_t axis, num;
  };
  const std::vector<SplitCase> cases = {
      {Shape{6}, 0, 3},           {Shape{4, 6}, 0, 2}, {Shape{4, 6}, 1, 3},       {Shape{3, 4, 5}, -2, 4},
      {Shape{2, 0, 6}, 2, 2},     {Shape{5, 7}, 1, 1}, {Shape{2, 64, 3, 4, 32}, 2, 3},  // a q, k, v split
  };
  uint64_t seed = 150;
  for (DType dt : kAllDTypes)
    for (const SplitCase& c : cases) {
      const Tensor x = random_tensor(dt, c.shape, seed++, Values::kAllBits);
      const Attrs attrs{{"axis", c.axis}, {"num_split", c.num}};
      const std::vector<Tensor> want = run_all(*cpu_device(), "Split", {x}, attrs);
      const std::vector<Tensor> got = run_all(*gpu(), "Split", {x}, attrs);
      ASSERT_EQ(want.size(), static_cast<size_t>(c.num));
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        const std::string what = std::string(dtype_name(dt)) + " " + c.shape.to_string() + " axis " +
                                 std::to_string(c.axis) + " part " + std::to_string(k);
        ASSERT_EQ(want[k].shape(), got[k].shape()) << what;
        ASSERT_EQ(host_bytes(want[k]), host_bytes(got[k])) << what;
      }
    }
}

struct ConcatCase {
  std::vector<Shape> shapes;
  int64_t axis;
};

TEST(CudaConcat, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<ConcatCase> cases = {
      {{Shape{2, 3}, Shape{2, 4}}, 1},
      {{Shape{2, 3}, Shape{5, 3}}, 0},                          // one contiguous block each
      {{Shape{2, 3}, Shape{2, 0}, Shape{2, 1}}, -1},            // an empty piece in the middle
      {{Shape{0, 3}, Shape{0, 3}}, 0},                          // empty output
      {{Shape{3, 4, 5}, Shape{3, 2, 5}, Shape{3, 1, 5}}, 1},
      {{Shape{7}}, 0},                                          // a single input
      {{Shape{3, 0}, Shape{3, 4}}, 1},                          // the only non-empty piece fills rows
      {{Shape{1000, 300}, Shape{1000, 1}}, 1},                  // large, ragged
      {{Shape{1, 2}, Shape{1, 3}, Shape{1, 4}, Shape{1, 5}}, 1},
  };
  uint64_t seed = 200;
  for (DType dt : kAllDTypes) {
    for (const ConcatCase& c : cases) {
      std::vector<Tensor> ins;
      std::string what = std::string(dtype_name(dt)) + " axis " + std::to_string(c.axis);
      std::vector<int64_t> out(c.shapes[0].begin(), c.shapes[0].end());
      const int64_t axis = c.axis < 0 ? c.axis + c.shapes[0].rank() : c.axis;
      out[static_cast<size_t>(axis)] = 0;
      for (const Shape& s : c.shapes) {
        ins.push_back(random_tensor(dt, s, seed++, Values::kAllBits));
        out[static_cast<size_t>(axis)] += s[axis];
        what += " " + s.to_string();
      }
      expect_same_bits("ConcatV2", ins, dt, Shape(out), Attrs{{"axis", c.axis}}, what);
    }
  }
}

struct PadCase {
  Shape shape;
  std::vector<int64_t> paddings;
};

TEST(CudaPad, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<PadCase> cases = {
      {Shape{3, 4}, {1, 2, 0, 3}},
      {Shape{3, 4}, {0, 0, 0, 0}},              // no padding: a copy
      {Shape{0, 3}, {1, 1, 2, 0}},              // empty input: all zeros
      {Shape{2, 0}, {0, 0, 0, 0}},              // empty output
      {Shape{}, {}},                            // scalar
      {Shape{2, 3, 4}, {0, 0, 1, 1, 0, 0}},     // inner dim whole: merged runs
      {Shape{1000, 1000}, {0, 0, 1, 1}},        // narrow padding of a large matrix
      {Shape{5}, {3, 0}},
      {Shape{2, 1, 3}, {1, 0, 0, 2, 0, 0}},
      {Shape{4, 5, 6, 7}, {1, 1, 2, 0, 0, 3, 1, 1}},
      {Shape{1}, {0, 100000}},                  // padding much larger than the data
  };
  uint64_t seed = 300;
  for (DType dt : kAllDTypes) {
    for (const PadCase& c : cases) {
      std::vector<int64_t> out;
      for (int64_t d = 0; d < c.shape.rank(); ++d)
        out.push_back(c.shape[d] + c.paddings[static_cast<size_t>(2 * d)] + c.paddings[static_cast<size_t>(2 * d + 1)]);
      Tensor x = random_tensor(dt, c.shape, seed++, Values::kAllBits);
      expect_same_bits("Pad", {x}, dt, Shape(out), Attrs{{"paddings", c.paddings}},
                       std::string(dtype_name(dt)) + " " + c.shape.to_string() + " paddings " + list(c.paddings));
    }
  }
}

}  // namespace
}  // namespace weft::gpu_test
