// The reduce and activation kernels below the dispatch funnel: results that do not depend on the
// thread count, shape inference with unknown dims (graph mode), and the checks kernels must make
// themselves when inference could not (an empty axis hidden behind an unknown dim).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace weft {
namespace {

// A CPU device with a pool of a chosen size, so the parallel paths run with several threads
// whatever machine the test is on.
class PoolDevice final : public Device {
 public:
  explicit PoolDevice(int threads)
      : Device("/job:localhost/replica:0/task:0/device:CPU:0", DeviceType::CPU, 0), pool_(threads) {}
  std::string description() const override { return "test pool"; }
  Allocator& allocator() override { return cpu_device()->allocator(); }
  ThreadPool& pool() override { return pool_; }
  void copy_to_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  ThreadPool pool_;
};

const OpDef& def(const char* name) {
  register_builtin_ops();
  return op_registry().get(name);
}

// Runs op's CPU kernel on `x` into an output of `out_shape` (by default what inference says).
Tensor run_kernel(const char* name, const Tensor& x, const Attrs& attrs, Device& device, const Shape* out_shape = nullptr,
                  DType out_dtype = DType::Float32) {
  const OpDef& op = def(name);
  std::array<Tensor, 1> in{x};
  std::array<Tensor, 1> out;
  if (out_shape) {
    out[0] = Tensor::empty(out_dtype, *out_shape);
  } else {
    InferContext ic(op, in, attrs);
    op.infer(ic);
    out[0] = Tensor::empty(ic.output(0).dtype, ic.output(0).shape);
  }
  KernelContext kc{op, in, out, attrs, device};
  KernelFn fn = op.kernel(DeviceType::CPU, x.dtype());
  if (!fn) throw NotFound(std::string("no CPU kernel for ") + name);
  fn(kc);
  return out[0];
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-3, 3);
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (float& e : v) e = d(gen);
  return Tensor::from_host(DType::Float32, shape, v.data());
}

template <class T>
std::vector<T> values(const Tensor& t) {
  return t.to_vector<T>();
}

struct Case {
  const char* op;
  Shape shape;
  Attrs attrs;
};

// Work is split by the shapes alone and partials combine in a fixed order, so 1, 3 and 4 threads
// must give identical bits, and the same as the process's own CPU device.
TEST(ReduceKernels, ResultsDoNotDependOnThreadCount) {
  const int64_t big = int64_t{1} << 20;
  using Axes = std::vector<int64_t>;
  const std::vector<Case> cases = {
      {"Sum", Shape{big}, {{"axes", Axes{}}}},
      {"Sum", Shape{1024, 1024}, {{"axes", Axes{0}}}},
      {"Sum", Shape{1024, 1024}, {{"axes", Axes{1}}}},
      {"Sum", Shape{big / 2, 2}, {{"axes", Axes{0}}}},
      {"Sum", Shape{2, big / 2}, {{"axes", Axes{1}}}},
      {"Mean", Shape{64, 128, 128}, {{"axes", Axes{0, 2}}}},
      {"Mean", Shape{big}, {{"axes", Axes{}}}},
      {"Max", Shape{big}, {{"axes", Axes{}}}},
      {"Max", Shape{8, 128, 1024}, {{"axes", Axes{1}}, {"keepdims", true}}},
      {"Min", Shape{4, big / 4}, {{"axes", Axes{-1}}}},
      {"Min", Shape{big / 8, 8}, {{"axes", Axes{0}}}},
      {"ArgMax", Shape{big}, {{"axis", int64_t{0}}}},
      {"ArgMax", Shape{big / 4, 4}, {{"axis", int64_t{0}}}},
      {"ArgMax", Shape{1024, 1024}, {{"axis", int64_t{1}}}},
      {"Softmax", Shape{1024, 1024}, {{"axis", int64_t{-1}}}},
      {"Softmax", Shape{1024, 1024}, {{"axis", int64_t{0}}}},
      {"LogSoftmax", Shape{16, 256, 256}, {{"axis", int64_t{1}}}},
      {"Softmax", Shape{big}, {{"axis", int64_t{0}}}},
      {"LogSoftmax", Shape{3, 100001}, {{"axis", int64_t{1}}}},
      {"Sigmoid", Shape{big}, {}},
      {"Relu", Shape{big}, {}},
  };
  PoolDevice one(1), three(3), four(4);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + c.shape.to_string());
    const Tensor x = random_tensor(c.shape, 21);
    const Tensor base = run_kernel(c.op, x, c.attrs, one);
    for (Device* d : {static_cast<Device*>(&three), static_cast<Device*>(&four), cpu_device()}) {
      const Tensor y = run_kernel(c.op, x, c.attrs, *d);
      ASSERT_EQ(y.shape(), base.shape());
      if (y.dtype() == DType::Int64) EXPECT_EQ(values<int64_t>(y), values<int64_t>(base));
      else EXPECT_EQ(values<float>(y), values<float>(base));
    }
  }
}

TEST(ReduceKernels, FourThreadsMatchAReference) {
  PoolDevice four(4);
  const int64_t rows = 3000, cols = 700;
  const Tensor x = random_tensor(Shape{rows, cols}, 5);
  const std::vector<float> v = values<float>(x);
  const auto col_sums = values<float>(run_kernel("Sum", x, {{"axes", std::vector<int64_t>{0}}}, four));
  const auto row_max = values<float>(run_kernel("Max", x, {{"axes", std::vector<int64_t>{1}}}, four));
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += v[r * cols + c];
    ASSERT_NEAR(col_sums[c], s, 1e-4) << c;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float m = v[r * cols];
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, v[r * cols + c]);
    ASSERT_EQ(row_max[r], m) << r;
  }
}

Tensor symbolic(DType dtype, Shape shape) {
  auto ref = std::make_unique<SymbolicRef>();
  ref->node_name = "x";
  return Tensor::symbolic(dtype, std::move(shape), std::move(ref));
}

TensorMeta infer(const char* name, const Tensor& x, const Attrs& attrs) {
  const OpDef& op = def(name);
  std::array<Tensor, 1> in{x};
  InferContext ic(op, in, attrs);
  op.infer(ic);
  return ic.output(0);
}

TEST(ReduceKernels, InferenceWithUnknownDims) {
  const Tensor x = symbolic(DType::Float32, Shape{-1, 5, -1});
  using Axes = std::vector<int64_t>;
  EXPECT_EQ(infer("Sum", x, {{"axes", Axes{1}}}).shape, (Shape{-1, -1}));
  EXPECT_EQ(infer("Mean", x, {{"axes", Axes{-1}}, {"keepdims", true}}).shape, (Shape{-1, 5, 1}));
  EXPECT_EQ(infer("Max", x, {{"axes", Axes{}}, {"keepdims", true}}).shape, (Shape{1, 1, 1}));
  EXPECT_EQ(infer("Min", x, {}).shape, Shape{});
  EXPECT_EQ(infer("Max", x, {{"axes", Axes{0, 2}}}).shape, Shape{5});  // unknown dims may be empty: checked at run time
  const TensorMeta am = infer("ArgMax", x, {{"axis", int64_t{-3}}});
  EXPECT_EQ(am.shape, (Shape{5, -1}));
  EXPECT_EQ(am.dtype, DType::Int64);
  EXPECT_EQ(infer("Softmax", x, {{"axis", int64_t{0}}}).shape, (Shape{-1, 5, -1}));
  EXPECT_EQ(infer("Relu", symbolic(DType::Int32, Shape{-1}), {}).dtype, DType::Int32);
  EXPECT_THROW(infer("Sum", x, {{"axes", Axes{3}}}), InvalidArgument);
  EXPECT_THROW(infer("Sum", x, {{"axes", Axes{0, -3}}}), InvalidArgument);
  EXPECT_THROW(infer("Max", symbolic(DType::Float32, Shape{-1, 0}), {{"axes", Axes{1}}}), InvalidArgument);
  EXPECT_THROW(infer("ArgMax", symbolic(DType::Float32, Shape{0, -1}), {{"axis", int64_t{0}}}), InvalidArgument);
  EXPECT_THROW(infer("Softmax", x, {{"axis", int64_t{3}}}), InvalidArgument);
  EXPECT_THROW(infer("Sigmoid", symbolic(DType::Int64, Shape{-1}), {}), InvalidArgument);
}

TEST(ReduceKernels, KernelsRejectAnEmptyAxisInferenceCouldNotSee) {
  PoolDevice two(2);
  const Tensor empty = Tensor::empty(DType::Float32, Shape{0, 3});
  const Shape three{3};
  for (const char* op : {"Max", "Min"}) {
    try {
      run_kernel(op, empty, {{"axes", std::vector<int64_t>{0}}}, two, &three);
      ADD_FAILURE() << op << " did not throw";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(def(op).display), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(run_kernel("ArgMax", empty, {{"axis", int64_t{0}}}, two, &three, DType::Int64), InvalidArgument);
  // Sum has an identity: zeros, no error.
  const Tensor s = run_kernel("Sum", empty, {{"axes", std::vector<int64_t>{0}}}, two, &three);
  EXPECT_EQ(values<float>(s), (std::vector<float>{0, 0, 0}));
}

}  // namespace
}  // namespace weft
