// The CUDA kernels of the ops driven by index tensors (GatherV2, OneHot, UnsortedSegmentSum)
// against the CPU kernels: UnsortedSegmentSum with the CPU's very bits, and bad indices refused
// with the CPU's very message at the GPU's next synchronisation, once; and, without a GPU, that
// every op of the data-movement, creation and variable families has a CUDA kernel for exactly
// the dtypes the CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"

namespace weft::gpu_test {
namespace {

constexpr DType kAllDTypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

// `values` as an integer tensor of dtype dt (narrow types wrap, like a cast).
Tensor integer_tensor(DType dt, const Shape& shape, const std::vector<int64_t>& values) {
  return visit_dtype(dt, [&](auto zero) {
    using I = decltype(zero);
    // A plain array: std::vector<bool> (instantiated here too) has no data().
    std::unique_ptr<I[]> typed(new I[values.size() + 1]);
    if constexpr (std::is_integral_v<I>) {
      for (size_t i = 0; i < values.size(); ++i) typed[i] = static_cast<I>(values[i]);
    } else {
      throw InvalidArgument("integer_tensor needs an integer dtype");
    }
    return Tensor::from_host(dt, shape, typed.get());
  });
}

// Indices in [0, limit) (or anywhere in [-3, limit + 3) with `wild`), as int32 or int64.
Tensor index_tensor(DType dt, const Shape& shape, int64_t limit, uint64_t seed, bool wild = false) {
  std::mt19937_64 rng(seed);
  const int64_t n = shape.num_elements();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) {
    if (wild) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(limit + 6)) - 3;
    else x = limit > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(limit)) : 0;
  }
  return integer_tensor(dt, shape, v);
}

// The message of the InvalidArgument `f` throws, or "" when it throws none.
template <class F>
std::string failure(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

struct GatherCase {
  Shape params, indices;
  int64_t axis;
};

Shape gathered(const Shape& params, const Shape& indices, int64_t axis) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < axis; ++i) out.push_back(params[i]);
  for (int64_t d : indices) out.push_back(d);
  for (int64_t i = axis + 1; i < params.rank(); ++i) out.push_back(params[i]);
  return Shape(out);
}

TEST(CudaGather, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<GatherCase> cases = {
      {Shape{10, 4}, Shape{6}, 0},      {Shape{3, 10, 4}, Shape{2, 3}, 1}, {Shape{3, 10}, Shape{5}, -1},
      {Shape{10}, Shape{}, 0},          {Shape{10, 4}, Shape{0}, 0},       {Shape{5, 0}, Shape{3}, 0},
      {Shape{0, 5}, Shape{4}, 1},       {Shape{50000, 64}, Shape{3000}, 0}, {Shape{64, 50000}, Shape{7, 9}, 1},
  };
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    for (DType it : {int32, int64}) {
      for (const GatherCase& c : cases) {
        const int64_t axis = c.axis < 0 ? c.axis + c.params.rank() : c.axis;
        Tensor params = random_tensor(dt, c.params, seed++, Values::kAllBits);
        Tensor indices = index_tensor(it, c.indices, c.params[axis], seed++);
        const Shape out = gathered(c.params, c.indices, axis);
        const Attrs attrs{{"axis", c.axis}};
        Tensor want = run_on(*cpu_device(), "GatherV2", {params, indices}, dt, out, attrs);
        Tensor got = run_on(*gpu(), "GatherV2", {params, indices}, dt, out, attrs);
        ASSERT_EQ(host_bytes(want), host_bytes(got)) << dtype_name(dt) << " " << c.params.to_string() << " indices "
                                                     << dtype_name(it) << " " << c.indices.to_string();
      }
    }
  }
}

TEST(CudaGather, OutOfRangeIndicesFailWithTheCpuMessage) {
  WEFT_REQUIRE_GPU();
  Tensor params = random_tensor(float32, Shape{3, 5, 2}, 1, Values::kGeneral);
  for (DType it : {int32, int64}) {
    for (int64_t bad : {int64_t{5}, int64_t{-1}, int64_t{1} << 40}) {
      if (it == int32 && bad > (int64_t{1} << 31)) continue;
      std::vector<int64_t> v = {0, 4, 2, bad, 1, bad};  // the first bad one is at [1, 0]
      Tensor indices = integer_tensor(it, Shape{2, 3}, v);
      const Attrs attrs{{"axis", int64_t{1}}};
      const Shape out{3, 2, 3, 2};
      const std::string cpu = failure([&] { run_on(*cpu_device(), "GatherV2", {params, indices}, float32, out, attrs); });
      const std::string gpu_msg = failure([&] { run_on(*gpu(), "GatherV2", {params, indices}, float32, out, attrs); });
      ASSERT_NE(cpu, "");
      EXPECT_NE(cpu.find("indices[1, 0] = " + std::to_string(bad)), std::string::npos) << cpu;
      EXPECT_EQ(gpu_msg, cpu);
    }
  }
  // Indices are checked even when the output is empty: reading it copies nothing, so the error
  // surfaces at the next synchronisation; raised once, it is gone.
  Tensor empty_params = random_tensor(float32, Shape{4, 0}, 2, Values::kGeneral);
  const std::vector<int32_t> bad_values = {1, 7, 2};
  Tensor bad = Tensor::from_host(int32, Shape{3}, bad_values.data());
  EXPECT_EQ(failure([&] { run_on(*gpu(), "GatherV2", {empty_params, bad}, float32, Shape{3, 0}); }), "");
  const std::string empty_msg = failure([&] { gpu()->synchronize(); });
  EXPECT_NE(empty_msg.find("indices[1] = 7"), std::string::npos) << empty_msg;
  EXPECT_EQ(failure([&] { gpu()->synchronize(); }), "");
  Tensor good = index_tensor(int64, Shape{8}, 3, 4);
  Tensor want = run_on(*cpu_device(), "GatherV2", {params, good}, float32, Shape{8, 5, 2});
  EXPECT_TRUE(same_values(want, run_on(*gpu(), "GatherV2", {params, good}, float32, Shape{8, 5, 2}), 0));
}

// The call queues its kernel and returns; the error waits for the next synchronisation, names the
// op and the first bad index as the CPU does, is raised once, and leaves zeros in the output where
// the indices were bad (nothing was read out of bounds).
TEST(CudaGather, BadIndicesSurfaceAtTheNextSynchronisationAndGatherZeros) {
  WEFT_REQUIRE_GPU();
  Tensor params = random_tensor(float32, Shape{6, 4}, 3, Values::kGeneral);
  Tensor indices = integer_tensor(int64, Shape{5}, {2, 9, 0, -4, 5});
  const Shape out_shape{5, 4};
  const std::string cpu = failure([&] { run_on(*cpu_device(), "GatherV2", {params, indices}, float32, out_shape); });
  ASSERT_NE(cpu.find("indices[1] = 9"), std::string::npos) << cpu;
  Tensor out;
  EXPECT_EQ(failure([&] { out = run_on_device(*gpu(), "GatherV2", {params, indices}, float32, out_shape); }), "")
      << "the call itself must not wait for the GPU";
  EXPECT_EQ(failure([&] { gpu()->synchronize(); }), cpu);
  Tensor host;
  EXPECT_EQ(failure([&] { host = out.to(cpu_device()); }), "") << "raised once";
  const auto* p = static_cast<const unsigned char*>(raw_data(params));
  const auto* o = static_cast<const unsigned char*>(raw_data(host));
  const size_t row = 4 * sizeof(float);
  const std::vector<unsigned char> zeros(row, 0);
  for (auto [r, from] : {std::pair{0, 2}, std::pair{1, -1}, std::pair{2, 0}, std::pair{3, -1}, std::pair{4, 5}}) {
    const unsigned char* want = from < 0 ? zeros.data() : p + from * row;
    EXPECT_EQ(std::memcmp(o + r * row, want, row), 0) << "output row " << r;
  }
}

// The first bad call queued is the one raised, at whichever read comes first; the next, good call
// is untouched. A bad call queued before the first error was raised is not raised again: like
// the rest of a failed step, its output is not to be used (its bad rows hold zeros).
TEST(CudaGather, TheFirstBadCallIsRaisedAndTheErrorDoesNotLeak) {
  WEFT_REQUIRE_GPU();
  Tensor params = random_tensor(float64, Shape{10, 3}, 4, Values::kGeneral);
  Tensor first = integer_tensor(int32, Shape{2, 2}, {0, 1, 12, 3});
  Tensor second = integer_tensor(int32, Shape{2}, {-1, 0});
  Tensor good = index_tensor(int32, Shape{7}, 10, 5);
  const std::string cpu =
      failure([&] { run_on(*cpu_device(), "GatherV2", {params, first}, float64, Shape{2, 2, 3}); });
  ASSERT_NE(cpu.find("indices[1, 0] = 12"), std::string::npos) << cpu;
  Tensor a = run_on_device(*gpu(), "GatherV2", {params, first}, float64, Shape{2, 2, 3});
  Tensor b = run_on_device(*gpu(), "GatherV2", {params, second}, float64, Shape{2, 3});
  EXPECT_EQ(failure([&] { b.to(cpu_device()); }), cpu) << "a read of any value raises the first bad call";
  EXPECT_EQ(failure([&] { gpu()->synchronize(); }), "");
  for (int i = 0; i < 3; ++i) {
    Tensor want = run_on(*cpu_device(), "GatherV2", {params, good}, float64, Shape{7, 3});
    Tensor got;
    ASSERT_EQ(failure([&] { got = run_on(*gpu(), "GatherV2", {params, good}, float64, Shape{7, 3}); }), "");
    EXPECT_EQ(host_bytes(want), host_bytes(got));
  }
}

TEST(CudaOneHot, MatchesCpuIncludingOutOfRangeIndices) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 50;
  for (DType it : {int8, uint8, int32, int64}) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{7}, Shape{3, 4}, Shape{100000}}) {
      for (int64_t depth : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{100}}) {
        Tensor indices = index_tensor(it, shape, depth, seed++, /*wild=*/true);
        std::vector<int64_t> out(shape.begin(), shape.end());
        out.push_back(depth);
        const Attrs attrs{{"depth", depth}};
        Tensor want = run_on(*cpu_device(), "OneHot", {indices}, float32, Shape(out), attrs);
        Tensor got = run_on(*gpu(), "OneHot", {indices}, float32, Shape(out), attrs);
        ASSERT_EQ(host_bytes(want), host_bytes(got)) << dtype_name(it) << " " << shape.to_string() << " depth " << depth;
      }
    }
  }
}

struct SegmentCase {
  Shape data, ids;
  int64_t segments;
};

TEST(CudaUnsortedSegmentSum, MatchesCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  const std::vector<SegmentCase> cases = {
      {Shape{10, 4}, Shape{10}, 3},    {Shape{6, 2, 3}, Shape{6, 2}, 5},  {Shape{10}, Shape{10}, 20},
      {Shape{0, 4}, Shape{0}, 3},      {Shape{5, 0}, Shape{5}, 2},        {Shape{0}, Shape{0}, 0},
      {Shape{100000}, Shape{100000}, 7},                                  // many rows into few segments
      {Shape{2000, 1500}, Shape{2000}, 300},  {Shape{3000, 64}, Shape{3000}, 50000},  // an embedding's gradient
  };
  uint64_t seed = 70;
  for (DType dt : {float32, float64, int32, int64}) {
    for (DType it : {int32, int64}) {
      for (const SegmentCase& c : cases) {
        // Floats from [-3, 3] without specials: an inf plus a -inf is a NaN on both sides, but
        // x86 and GPUs give NaNs different bits.
        Tensor data = random_tensor(dt, c.data, seed++, is_floating(dt) ? Values::kSmallPower : Values::kGeneral);
        Tensor ids = index_tensor(it, c.ids, c.segments, seed++);
        std::vector<int64_t> out = {c.segments};
        for (int64_t d = c.ids.rank(); d < c.data.rank(); ++d) out.push_back(c.data[d]);
        const Attrs attrs{{"num_segments", c.segments}};
        Tensor want = run_on(*cpu_device(), "UnsortedSegmentSum", {data, ids}, dt, Shape(out), attrs);
        Tensor got = run_on(*gpu(), "UnsortedSegmentSum", {data, ids}, dt, Shape(out), attrs);
        const std::string what = std::string(dtype_name(dt)) + " " + c.data.to_string() + " ids " +
                                 std::string(dtype_name(it)) + " segments " + std::to_string(c.segments);
        ASSERT_EQ(want.shape(), got.shape()) << what;
        ASSERT_EQ(host_bytes(want), host_bytes(got)) << what;  // the CPU's order of adds, so its bits
      }
    }
  }
}

// Values of magnitudes 2^-30 to 2^30, both signs, many rows per segment: nearly every other order
// of the adds rounds differently somewhere (checked below for the reverse order), yet the GPU
// gives the CPU's bits, and the same bits every run.
TEST(CudaUnsortedSegmentSum, SameBitsAsTheCpuWhereTheOrderOfAddsMatters) {
  WEFT_REQUIRE_GPU();
  const std::vector<SegmentCase> cases = {
      {Shape{50000, 2}, Shape{50000}, 4}, {Shape{4096, 64}, Shape{4096}, 100}, {Shape{5000, 8}, Shape{5000}, 20000}};
  uint64_t seed = 300;
  for (DType dt : {float32, float64}) {
    for (DType it : {int32, int64}) {
      for (const SegmentCase& c : cases) {
        std::mt19937_64 rng(seed++);
        const int64_t n = c.data.num_elements();
        std::vector<double> v(static_cast<size_t>(n));
        for (double& x : v)
          x = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng), static_cast<int>(rng() % 61) - 30) *
              (rng() & 1 ? 1 : -1);
        const std::vector<float> narrow(v.begin(), v.end());
        Tensor data = dt == float32 ? Tensor::from_host(dt, c.data, narrow.data()) : Tensor::from_host(dt, c.data, v.data());
        Tensor ids = index_tensor(it, c.ids, c.segments, seed++);
        std::vector<int64_t> out = {c.segments};
        for (int64_t d = c.ids.rank(); d < c.data.rank(); ++d) out.push_back(c.data[d]);
        const Attrs attrs{{"num_segments", c.segments}};
        const std::string what = std::string(dtype_name(dt)) + " " + c.data.to_string() + " ids " +
                                 std::string(dtype_name(it)) + " segments " + std::to_string(c.segments);
        Tensor want = run_on(*cpu_device(), "UnsortedSegmentSum", {data, ids}, dt, Shape(out), attrs);
        const std::vector<unsigned char> first = host_bytes(run_on(*gpu(), "UnsortedSegmentSum", {data, ids}, dt, Shape(out), attrs));
        const std::vector<unsigned char> second = host_bytes(run_on(*gpu(), "UnsortedSegmentSum", {data, ids}, dt, Shape(out), attrs));
        ASSERT_EQ(host_bytes(want), first) << what;
        ASSERT_EQ(first, second) << what << ": two runs";
        if (dt != float32 || c.segments != 4) continue;
        // The test has teeth: the rows added in reverse order give other bits.
        const int64_t inner = c.data[1];
        std::vector<float> reverse(static_cast<size_t>(c.segments * inner), 0.f);
        for (int64_t r = c.data[0] - 1; r >= 0; --r)
          for (int64_t e = 0; e < inner; ++e)
            reverse[static_cast<size_t>(static_cast<int64_t>(element(ids, r)) * inner + e)] +=
                static_cast<float>(v[static_cast<size_t>(r * inner + e)]);
        EXPECT_NE(std::memcmp(reverse.data(), first.data(), first.size()), 0) << what;
      }
    }
  }
}

TEST(CudaUnsortedSegmentSum, BadIdsFailWithTheCpuMessage) {
  WEFT_REQUIRE_GPU();
  Tensor data = random_tensor(int32, Shape{4, 3}, 1, Values::kGeneral);
  for (int64_t bad : {int64_t{-2}, int64_t{3}}) {
    std::vector<int64_t> v = {0, 2, bad, 1};
    Tensor ids = Tensor::from_host(int64, Shape{4}, v.data());
    const Attrs attrs{{"num_segments", int64_t{3}}};
    const std::string cpu =
        failure([&] { run_on(*cpu_device(), "UnsortedSegmentSum", {data, ids}, int32, Shape{3, 3}, attrs); });
    const std::string gpu_msg = failure([&] { run_on(*gpu(), "UnsortedSegmentSum", {data, ids}, int32, Shape{3, 3}, attrs); });
    ASSERT_NE(cpu, "");
    EXPECT_NE(cpu.find("segment_ids[2] = " + std::to_string(bad)), std::string::npos) << cpu;
    EXPECT_EQ(gpu_msg, cpu);
  }
  // num_segments 0 with rows: every id is out of range. The output is empty, so reading it waits
  // for nothing and the error surfaces at the next synchronisation.
  std::vector<int32_t> zero = {0};
  Tensor one_id = Tensor::from_host(int32, Shape{1}, zero.data());
  Tensor one_row = random_tensor(float32, Shape{1}, 2, Values::kGeneral);
  run_on_device(*gpu(), "UnsortedSegmentSum", {one_row, one_id}, float32, Shape{0}, Attrs{{"num_segments", int64_t{0}}});
  const std::string msg = failure([&] { gpu()->synchronize(); });
  EXPECT_NE(msg.find("segment_ids[0] = 0"), std::string::npos) << msg;
  EXPECT_EQ(failure([&] { gpu()->synchronize(); }), "");
}

// A row with a bad id is summed into no segment: once the error is raised, the output reads as
// the sum of the other rows.
TEST(CudaUnsortedSegmentSum, ARowWithABadIdIsSkipped) {
  WEFT_REQUIRE_GPU();
  Tensor data = random_tensor(int64, Shape{5, 2}, 8, Values::kGeneral);
  Tensor ids = integer_tensor(int32, Shape{5}, {1, 0, 4, 1, 2});
  const Attrs attrs{{"num_segments", int64_t{3}}};
  Tensor out = run_on_device(*gpu(), "UnsortedSegmentSum", {data, ids}, int64, Shape{3, 2}, attrs);
  const std::string msg = failure([&] { gpu()->synchronize(); });
  EXPECT_NE(msg.find("segment_ids[2] = 4"), std::string::npos) << msg;
  // The CPU's sum of rows 0, 1, 3 and 4.
  std::vector<int64_t> kept;
  const auto* d = static_cast<const int64_t*>(raw_data(data));
  for (int r : {0, 1, 3, 4}) kept.insert(kept.end(), d + 2 * r, d + 2 * r + 2);
  Tensor kept_data = Tensor::from_host(int64, Shape{4, 2}, kept.data());
  Tensor kept_ids = integer_tensor(int32, Shape{4}, {1, 0, 1, 2});
  Tensor want = run_on(*cpu_device(), "UnsortedSegmentSum", {kept_data, kept_ids}, int64, Shape{3, 2}, attrs);
  EXPECT_EQ(host_bytes(want), host_bytes(out.to(cpu_device())));
}

// Runs without a GPU: each op has a CUDA kernel for exactly the dtypes its CPU kernel has.
TEST(CudaKernels, DataMovementCreationAndVariableOpsRegisteredForTheCpuDtypes) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  for (const char* name : {"Transpose", "ConcatV2", "Slice", "Split", "GatherV2", "OneHot", "Pad", "UnsortedSegmentSum", "Fill",
                           "Range", "BroadcastTo", "BroadcastLike", "Size", "Const", "NoOp", "ReadVariable",
                           "ReadVariableForUpdate", "AssignVariable", "AssignAddVariable", "AssignSubVariable"}) {
    const OpDef* op = op_registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    int count = 0;
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType dt = static_cast<DType>(d);
      EXPECT_EQ(has_kernel(*op, DeviceType::CUDA, dt), has_kernel(*op, DeviceType::CPU, dt)) << name << " " << dtype_name(dt);
      count += has_kernel(*op, DeviceType::CUDA, dt);
    }
    EXPECT_GT(count, 0) << name;
  }
  // The pure data movers take every dtype, float16 and bfloat16 included.
  for (const char* name : {"Transpose", "ConcatV2", "Slice", "Split", "GatherV2", "Pad", "Fill", "BroadcastTo",
                           "BroadcastLike"})
    for (DType dt : kAllDTypes)
      EXPECT_TRUE(has_kernel(*op_registry().find(name), DeviceType::CUDA, dt)) << name << " " << dtype_name(dt);
}

}  // namespace
}  // namespace weft::gpu_test
