// The fusion pass folds a Relu after a FusedBatchNorm into it, and the ReluGrad before a
// FusedBatchNormGrad or after a MaxPoolGrad into that (the "activation" attribute): the traced
// graph of a ResNet-style or LeNet-style training step holds neither Relu nor ReluGrad, and its
// results are the bits of the unfused ops run eagerly, in float32 and float64. Only in a process
// without a GPU: fusion runs before placement, and the CUDA kernels refuse the attribute. A batch norm whose output has
// another reader keeps its Relu. A node with an unknown activation, or the gradient with the
// wrong inputs for its activation, is an InvalidArgument naming it.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "runtime/graph.h"
#include "runtime/op_registry.h"
#include "scheduler/graph_compiler.h"
#include "tensor_test_util.h"
#include "weft/weft.h"

namespace weft {
namespace {

std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (int32_t id : g.ir().node_ids()) {
    const Node& n = g.ir().node(id);
    const std::string act = n.attrs.get_or<std::string>("activation", "");
    ++counts[n.type() + (act.empty() ? "" : "/" + act)];
  }
  return counts;
}

// Whether this process folds activations at all: not where a GPU may take the graph (below).
bool folds() { return optimize_options_for(local_placement_devices()).cpu_only_fusions; }

// Where the process folds: none of `gone` left and one of each of `fused`; elsewhere no node with
// an activation attribute at all.
void expect_folded(const std::map<std::string, int>& counts, const std::vector<std::string>& gone,
                   const std::vector<std::string>& fused) {
  if (!folds()) {
    for (const auto& [type, n] : counts) EXPECT_EQ(type.find("/relu"), std::string::npos) << type;
    return;
  }
  for (const std::string& t : gone) EXPECT_EQ(counts.count(t), 0u) << t;
  for (const std::string& t : fused) EXPECT_EQ(counts.count(t) ? counts.at(t) : 0, 1) << t;
}

// The gradients of sum(relu(batch_norm(x)) * w) in x, gamma and beta, and the activations.
std::vector<Tensor> block(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& w, bool training) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(gamma);
  tape.watch(beta);
  const int64_t c = x.shape()[x.shape().rank() - 1];
  const Tensor mean = training ? Tensor() : zeros({c}, x.dtype()), var = training ? Tensor() : ones({c}, x.dtype());
  const Tensor y = relu(fused_batch_norm(x, gamma, beta, mean, var, 1e-3, training).y);
  std::vector<Tensor> out = tape.gradient(reduce_sum(mul(y, w)), {x, gamma, beta});
  out.push_back(y);
  return out;
}

TEST(ActivationFusion, ReluAndItsGradientFoldIntoTheBatchNormWithTheBitsOfTheSeparateOps) {
  for (DType dt : {float32, float64})
    for (const Shape& s : {Shape{8, 5, 5, 6}, Shape{4, 3, 3, 16}, Shape{9, 7}})
      for (bool training : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + s.to_string() + (training ? " training" : " inference"));
        const int64_t c = s[s.rank() - 1];
        const Tensor x = cast(random::normal(s, 0.3, 1, 1), dt), w = cast(random::normal(s, 0, 1, 2), dt);
        const Tensor gamma = cast(random::uniform({c}, 0.5, 2, 3), dt), beta = cast(random::normal({c}, 0, 0.5, 4), dt);
        auto traced = function([training](const Tensor& a, const Tensor& g, const Tensor& b, const Tensor& ww) {
          return block(a, g, b, ww, training);
        });
        const auto counts = op_counts(traced.graph(x, gamma, beta, w));
        expect_folded(counts, {"Relu", "ReluGrad"}, {"FusedBatchNorm/relu", "FusedBatchNormGrad/relu"});
        const std::vector<Tensor> got = traced(x, gamma, beta, w), want = block(x, gamma, beta, w, training);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bytes(got[i], want[i])) << "result " << i;
      }
}

// LeNet's conv, relu, max pool: the gradient's ReluGrad after the MaxPoolGrad is folded into it,
// for pools whose windows do not overlap (leaving cells out on odd sides, or tiling even ones)
// and do (3x3 stride 2).
TEST(ActivationFusion, ThePooledReluGradientFoldsIntoMaxPoolGrad) {
  for (DType dt : {float32, float64})
    for (const std::vector<int64_t>& k :
         {std::vector<int64_t>{2, 2, 2, 9}, std::vector<int64_t>{2, 2, 2, 10}, std::vector<int64_t>{3, 3, 2, 9}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " window " + std::to_string(k[0]) + " stride " + std::to_string(k[2]) +
                   " side " + std::to_string(k[3]));
      const Tensor x = cast(random::normal({4, k[3], k[3], 6}, 0, 1, 8), dt);
      const int64_t pooled = (k[3] + 1) / 2;
      const Tensor w = cast(random::normal({4, pooled, pooled, 6}, 0, 1, 9), dt);
      auto step = [k](const Tensor& a, const Tensor& ww) {
        GradientTape tape;
        tape.watch(a);
        const Tensor y = max_pool2d(relu(a), {k[0], k[1]}, {k[2], k[2]}, "SAME");
        return tape.gradient(reduce_sum(mul(y, ww)), a);
      };
      auto traced = function(step);
      const auto counts = op_counts(traced.graph(x, w));
      expect_folded(counts, {"ReluGrad"}, {"MaxPoolGrad/relu"});
      EXPECT_TRUE(same_bytes(traced(x, w), step(x, w)));
    }
}

// conv, batch norm, relu, max pool (a small CNN): the relu's gradient sits between the
// MaxPoolGrad and the FusedBatchNormGrad, and folds into one of them, once.
TEST(ActivationFusion, AReluGradBetweenPoolingAndBatchNormFoldsOnce) {
  const Tensor x = random::normal({4, 8, 8, 6}, 0, 1, 10), w = random::normal({4, 4, 4, 6}, 0, 1, 11);
  auto step = [](const Tensor& a, const Tensor& ww) {
    GradientTape tape;
    tape.watch(a);
    const Tensor bn = fused_batch_norm(a, ones({6}), zeros({6}), {}, {}, 1e-3, true).y;
    const Tensor y = max_pool2d(relu(bn), {2, 2}, {2, 2}, "VALID");
    return tape.gradient(reduce_sum(mul(y, ww)), a);
  };
  auto traced = function(step);
  const auto counts = op_counts(traced.graph(x, w));
  expect_folded(counts, {"Relu", "ReluGrad"}, {});
  EXPECT_TRUE(same_bytes(traced(x, w), step(x, w)));
}

// Fusion runs before placement, and the CUDA kernels refuse the activation: a graph that a GPU
// may take keeps its Relu and ReluGrad nodes.
TEST(ActivationFusion, OnlyWhereNoGpuMayTakeTheGraph) {
  PlacementDevice cpu{.name = "/job:localhost/replica:0/task:0/device:CPU:0", .type = DeviceType::CPU};
  PlacementDevice gpu{.name = "/job:localhost/replica:0/task:0/device:GPU:0", .type = DeviceType::CUDA};
  EXPECT_TRUE(optimize_options_for({cpu}).cpu_only_fusions);
  EXPECT_FALSE(optimize_options_for({cpu, gpu}).cpu_only_fusions);
  bool any_gpu = false;
  for (const DeviceInfo& d : list_devices()) any_gpu |= d.type == "GPU";
  EXPECT_EQ(optimize_options_for(local_placement_devices()).cpu_only_fusions, !any_gpu);
}

TEST(ActivationFusion, ABatchNormReadElsewhereKeepsItsRelu) {
  const Tensor x = random::normal({4, 3, 3, 8}, 0, 1, 5);
  auto traced = function([](const Tensor& a) {
    const Tensor y = fused_batch_norm(a, ones({8}), zeros({8}), {}, {}, 1e-3, true).y;
    return std::vector<Tensor>{relu(y), y};
  });
  const auto counts = op_counts(traced.graph(x));
  EXPECT_EQ(counts.count("FusedBatchNorm/relu"), 0u);
  EXPECT_EQ(counts.count("FusedBatchNorm"), 1u);
}

TEST(ActivationFusion, BadActivationAttributesAreInvalidArgument) {
  const Tensor x = random::normal({4, 3}, 0, 1, 6), g = ones({3}), b = zeros({3}), e = zeros({0});
  expect_error<InvalidArgument>([&] {
    dispatch(op_def("FusedBatchNorm"), std::vector<Tensor>{x, g, b, e, e},
             Attrs{{"is_training", true}, {"activation", std::string("tanh")}});
  }, {"fused_batch_norm", "activation", "tanh"});
  expect_error<InvalidArgument>([&] {
    dispatch(op_def("FusedBatchNormGrad"), std::vector<Tensor>{x, x, g, b, g},
             Attrs{{"is_training", true}, {"activation", std::string("relu")}});
  }, {"fused_batch_norm_grad", "6 inputs"});
  expect_error<InvalidArgument>([&] {
    dispatch(op_def("FusedBatchNormGrad"), std::vector<Tensor>{x, x, g, b, g, random::normal({4, 2}, 0, 1, 7)},
             Attrs{{"is_training", true}, {"activation", std::string("relu")}});
  }, {"activated y", "(4, 2)"});
  expect_error<InvalidArgument>([&] {
    const Tensor img = random::normal({1, 4, 4, 2}, 0, 1, 8);
    dispatch(op_def("MaxPoolGrad"), std::vector<Tensor>{img, max_pool2d(img, {2, 2}, {2, 2}), zeros({1, 2, 2, 2})},
             Attrs{{"ksize", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                   {"padding", std::string("VALID")}, {"activation", std::string("sigmoid")}});
  }, {"activation", "sigmoid"});
}

}  // namespace
}  // namespace weft
