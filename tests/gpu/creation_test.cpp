// The CUDA kernels of Fill, Range, BroadcastTo, BroadcastLike and Size against the CPU kernels:
// bit-identical for every dtype each registers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace weft::gpu_test {
namespace {

constexpr DType kAllDTypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};


TEST(CudaFill, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{3, 0, 2}, Shape{7, 9}, Shape{(1 << 22) + 5}}) {
      Tensor value = random_tensor(dt, Shape{}, seed++, Values::kAllBits);
      expect_same_bits("Fill", {value}, dt, shape, Attrs{{"shape", shape}},
                       std::string(dtype_name(dt)) + " " + shape.to_string());
    }
  }
}

struct RangeCase {
  double start, limit, delta;
};

TEST(CudaRange, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<RangeCase> cases = {
      {0, 10, 1}, {0, 1, 0.1}, {-3.5, 7.25, 0.37}, {10, -10, -0.7}, {5, 5, 1}, {0, 1e6, 0.3}, {1e8, 1e8 + 1000, 0.1},
  };
  for (DType dt : {float32, float64, int32, int64}) {
    for (const RangeCase& c : cases) {
      const int64_t n = static_cast<int64_t>(std::ceil(std::abs((c.limit - c.start) / c.delta)));
      expect_same_bits("Range", {}, dt, Shape{n},
                       Attrs{{"start", c.start}, {"limit", c.limit}, {"delta", c.delta}, {"dtype", dt}},
                       std::string(dtype_name(dt)) + " " + std::to_string(c.start) + " " + std::to_string(c.limit) +
                           " " + std::to_string(c.delta));
    }
  }
}

struct BroadcastCase {
  Shape in, target;
};

TEST(CudaBroadcast, ToAndLikeMatchCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<BroadcastCase> cases = {
      {Shape{}, Shape{5, 3}},        {Shape{3}, Shape{4, 3}},        {Shape{4, 1}, Shape{4, 6}},
      {Shape{2, 1, 3}, Shape{2, 5, 3}}, {Shape{5}, Shape{5}},          {Shape{1}, Shape{0}},
      {Shape{3}, Shape{0, 3}},       {Shape{1, 1}, Shape{1, 1}},     {Shape{1024, 1}, Shape{1024, 4097}},
      {Shape{7, 1, 1, 5}, Shape{2, 7, 3, 4, 5}},
  };
  uint64_t seed = 50;
  for (DType dt : kAllDTypes) {
    for (const BroadcastCase& c : cases) {
      const std::string what = std::string(dtype_name(dt)) + " " + c.in.to_string() + " -> " + c.target.to_string();
      Tensor x = random_tensor(dt, c.in, seed++, Values::kAllBits);
      expect_same_bits("BroadcastTo", {x}, dt, c.target, Attrs{{"shape", c.target}}, what);
      // BroadcastLike takes the target from a second tensor, of any dtype.
      Tensor like = random_tensor(int32, c.target, seed++, Values::kGeneral);
      expect_same_bits("BroadcastLike", {x, like}, dt, c.target, Attrs{}, what + " (like)");
    }
  }
}

TEST(CudaSize, MatchesCpuForEveryOutputType) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 80;
  for (DType out : kAllDTypes) {
    if (out == bool_) continue;  // the CPU has no Size kernel for bool either
    for (const Shape& shape : {Shape{}, Shape{0, 4}, Shape{3, 5}, Shape{300, 1000}}) {
      Tensor x = random_tensor(float32, shape, seed++, Values::kGeneral);
      expect_same_bits("Size", {x}, out, Shape{}, Attrs{{"out_type", out}},
                       std::string(dtype_name(out)) + " of " + shape.to_string());
    }
  }
}

}  // namespace
}  // namespace weft::gpu_test
