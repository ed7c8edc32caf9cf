// The LayerNorm and LayerNormGrad CPU kernels below the dispatch funnel: the same bits on 1, 3
// and 4 threads (rows split over the pool; the gradient's column sums in fixed blocks of rows, or,
// for long rows, per column), and shape inference with unknown dims (graph mode).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_internals.h"

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

// Every output of op's CPU kernel on `inputs`, allocated as inference says.
std::vector<Tensor> run(const char* name, const std::vector<Tensor>& inputs, const Attrs& attrs, Device& device) {
  const OpDef& op = def(name);
  InferContext ic(op, inputs, attrs);
  op.infer(ic);
  std::vector<Tensor> out;
  for (int i = 0; i < ic.num_outputs(); ++i) out.push_back(Tensor::empty(ic.output(i).dtype, ic.output(i).shape));
  KernelContext kc{op, inputs, out, attrs, device};
  op.kernel(DeviceType::CPU, inputs[0].dtype())(kc);
  return out;
}

Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (double& e : v) e = d(gen);
  if (dtype == DType::Float64) return Tensor::from_host(dtype, shape, v.data());
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_host(DType::Float32, shape, f.data());
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(raw_data(a), raw_data(b), a.nbytes()) == 0;
}

TEST(LayerNormKernels, ResultsDoNotDependOnThreadCount) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  // Many short rows (several row blocks), rows just past the fused column sums (2048), a few very
  // long rows (columns split over the pool), several normalised axes.
  const Case cases[] = {{{4096, 96}, -1}, {{40, 2049}, -1}, {{3, 100003}, -1}, {{64, 8, 33}, 1}};
  PoolDevice one(1), three(3), four(4);
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + c.shape.to_string());
      const int64_t axis = c.axis < 0 ? c.axis + c.shape.rank() : c.axis;
      Shape ns;
      for (int64_t i = axis; i < c.shape.rank(); ++i) ns.push_back(c.shape[i]);
      const Tensor x = random_tensor(dtype, c.shape, 1, -3, 5), dy = random_tensor(dtype, c.shape, 2, -1, 1);
      const Tensor g = random_tensor(dtype, ns, 3, 0.5, 2), b = random_tensor(dtype, ns, 4, -1, 1);
      const Attrs attrs{{"axis", c.axis}, {"epsilon", 1e-5}};
      const std::vector<Tensor> want = run("LayerNorm", {x, g, b}, attrs, one);
      const std::vector<Tensor> grad = run("LayerNormGrad", {dy, x, g, want[1], want[2]}, attrs, one);
      for (Device* d : {static_cast<Device*>(&three), static_cast<Device*>(&four), cpu_device()}) {
        const std::vector<Tensor> got = run("LayerNorm", {x, g, b}, attrs, *d);
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)])) << "output " << i;
        const std::vector<Tensor> got_grad = run("LayerNormGrad", {dy, x, g, want[1], want[2]}, attrs, *d);
        for (int i = 0; i < 3; ++i)
          EXPECT_TRUE(same_bits(got_grad[static_cast<size_t>(i)], grad[static_cast<size_t>(i)])) << "gradient " << i;
      }
    }
}

// Graph mode infers with unknown dims: they pass where the known ones agree, and the outputs
// take whatever is known.
TEST(LayerNormKernels, InfersWithUnknownDims) {
  auto symbolic = [](DType d, Shape s) {
    auto ref = std::make_unique<SymbolicRef>();
    ref->node_name = "x";
    return Tensor::symbolic(d, std::move(s), std::move(ref));
  };
  const Attrs attrs{{"axis", int64_t{1}}, {"epsilon", 1e-5}};
  const std::vector<Tensor> in = {symbolic(DType::Float32, {-1, 3, -1}), symbolic(DType::Float32, {-1, 4}),
                                  symbolic(DType::Float32, {3, -1})};
  const OpDef& op = def("LayerNorm");
  InferContext ic(op, in, attrs);
  op.infer(ic);
  EXPECT_EQ(ic.output(0).shape, (Shape{-1, 3, -1}));
  EXPECT_EQ(ic.output(1).shape, (Shape{-1}));
  const std::vector<Tensor> grad_in = {symbolic(DType::Float32, {2, -1, -1}), symbolic(DType::Float32, {-1, 3, -1}),
                                       symbolic(DType::Float32, {-1, 4}), symbolic(DType::Float32, {-1}),
                                       symbolic(DType::Float32, {2})};
  const OpDef& grad = def("LayerNormGrad");
  InferContext gc(grad, grad_in, attrs);
  grad.infer(gc);
  EXPECT_EQ(gc.output(0).shape, (Shape{2, 3, -1}));
  EXPECT_EQ(gc.output(1).shape, (Shape{3, 4}));
  const std::vector<Tensor> bad = {symbolic(DType::Float32, {-1, 3, -1}), symbolic(DType::Float32, {-1, 5}),
                                   symbolic(DType::Float32, {4, -1})};
  InferContext bc(op, bad, attrs);
  EXPECT_THROW(op.infer(bc), InvalidArgument);
}

}  // namespace
}  // namespace weft
