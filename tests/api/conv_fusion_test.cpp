// The fusion pass turns a Conv2D, the Add of its bias and a Relu into one FusedConv2D (oneDNN's
// convolution with the bias and relu in its epilogue) on the CPU: the traced graph holds it, in
// inference and in a training step, and its results are the bits of the three ops run eagerly,
// for the geometries a network has (a first layer of one channel, output channels that are not a
// multiple of the vector width, strides, dilations, padding). A sigmoid after the bias is not
// fused (oneDNN's sigmoid is not weft's). A bad bias is an InvalidArgument naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/graph.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_internals.h"
#include "weft/weft.h"

namespace weft {
namespace {

std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (int32_t id : g.ir().node_ids()) {
    const Node& n = g.ir().node(id);
    ++counts[n.type() == "FusedConv2D" ? "FusedConv2D/" + n.attrs.get_or<std::string>("activation", "") : n.type()];
  }
  return counts;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(raw_data(a), raw_data(b), static_cast<size_t>(a.nbytes())) == 0;
}

struct Geometry {
  std::string name;
  Shape x, k;
  std::vector<int64_t> strides;
  std::string padding;
  std::vector<int64_t> dilations;
};

const std::vector<Geometry> kGeometries = {
    {"lenet first layer", {8, 28, 28, 1}, {5, 5, 1, 6}, {1, 1}, "SAME", {1, 1}},
    {"lenet second layer", {8, 14, 14, 6}, {5, 5, 6, 16}, {1, 1}, "VALID", {1, 1}},
    {"3x3 same", {4, 9, 9, 16}, {3, 3, 16, 16}, {1, 1}, "SAME", {1, 1}},
    {"strided", {4, 10, 10, 8}, {3, 3, 8, 12}, {2, 2}, "SAME", {1, 1}},
    {"dilated", {2, 11, 11, 5}, {3, 3, 5, 7}, {1, 1}, "VALID", {2, 2}},
    {"1x1", {2, 6, 6, 32}, {1, 1, 32, 24}, {1, 1}, "VALID", {1, 1}},
};

template <class Body>
void expect_fused_equals_eager(DType dtype, Body body, const char* activation) {
  for (const Geometry& g : kGeometries) {
    SCOPED_TRACE(g.name + " " + std::string(dtype_name(dtype)));
    const Tensor x = cast(random::normal(g.x, 0, 1, 1), dtype);
    const Tensor k = cast(random::normal(g.k, 0, 0.3, 2), dtype);
    const Tensor b = cast(random::normal({g.k[3]}, 0, 0.5, 3), dtype);
    auto layer = [&](const Tensor& xb, const Tensor& kb, const Tensor& bb) {
      return body(conv2d(xb, kb, g.strides, g.padding, g.dilations) + bb);
    };
    auto traced = function(layer);
    const auto counts = op_counts(traced.graph(x, k, b));
    EXPECT_EQ(counts.count("Conv2D"), 0u);
    EXPECT_EQ(counts.count("Add"), 0u);
    EXPECT_EQ(counts.count("FusedConv2D/" + std::string(activation)), 1u);
    const Tensor eager = layer(x, k, b);
    EXPECT_TRUE(same_bits(traced(x, k, b), eager)) << "fused and eager results differ";
  }
}

TEST(ConvFusion, ConvBiasReluIsOneNodeWithTheBitsOfThreeOps) {
  for (DType t : {float32, float64})
    expect_fused_equals_eager(t, [](const Tensor& y) { return relu(y); }, "relu");
}

TEST(ConvFusion, ConvBiasWithoutActivationFuses) {
  expect_fused_equals_eager(float32, [](const Tensor& y) { return y; }, "");
}

TEST(ConvFusion, SigmoidStaysOutsideTheConvolution) {
  const Tensor x = random::normal({2, 8, 8, 3}, 0, 1, 1);
  const Tensor k = random::normal({3, 3, 3, 4}, 0, 0.3, 2);
  const Tensor b = random::normal({4}, 0, 0.5, 3);
  auto layer = function([](Tensor xb, Tensor kb, Tensor bb) { return sigmoid(conv2d(xb, kb, {1, 1}, "SAME") + bb); });
  const auto counts = op_counts(layer.graph(x, k, b));
  EXPECT_EQ(counts.count("FusedConv2D/"), 1u);
  EXPECT_EQ(counts.count("FusedConv2D/relu"), 0u);
  EXPECT_TRUE(same_bits(layer(x, k, b), sigmoid(conv2d(x, k, {1, 1}, "SAME") + b)));
}

// A training step of conv layers with relu: relu's gradient reads relu's output, so each layer's
// convolution, bias and relu still become one node; the step's loss equals the eager step's.
TEST(ConvFusion, TrainingStepFusesConvLayers) {
  const Tensor x = random::normal({8, 12, 12, 1}, 0, 1, 11);
  const Tensor y = cast(random::uniform({8}, 0, 2.99, 12), int32);
  nn::Sequential eager_model{nn::Conv2D(6, {5, 5}, {.padding = "same", .activation = nn::relu}),
                             nn::MaxPool2D({2, 2}), nn::Flatten(), nn::Dense(3)};
  nn::Sequential traced_model{nn::Conv2D(6, {5, 5}, {.padding = "same", .activation = nn::relu}),
                              nn::MaxPool2D({2, 2}), nn::Flatten(), nn::Dense(3)};
  random::set_seed(7);  // the layers make their variables on their first call: the same ones
  (void)eager_model(x, false);
  random::set_seed(7);
  (void)traced_model(x, false);
  optim::SGD eager_opt(0.05), traced_opt(0.05);
  auto step_of = [](nn::Sequential& model, optim::SGD& opt) {
    return [&model, &opt](const Tensor& x, const Tensor& y) {
      GradientTape tape;
      Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
      auto vars = model.trainable_variables();
      opt.apply_gradients(tape.gradient(loss, vars), vars);
      return loss;
    };
  };
  auto eager_step = step_of(eager_model, eager_opt);
  auto traced_step = function(step_of(traced_model, traced_opt));
  const auto counts = op_counts(traced_step.graph(x, y));
  EXPECT_EQ(counts.count("FusedConv2D/relu"), 1u);
  EXPECT_EQ(counts.count("Conv2D"), 0u);
  EXPECT_EQ(counts.count("Relu"), 0u);
  for (int i = 0; i < 3; ++i) {
    const float a = eager_step(x, y).item<float>(), b = traced_step(x, y).item<float>();
    EXPECT_NEAR(a, b, 1e-5f * std::max(1.f, std::abs(a))) << "step " << i;
  }
}

TEST(ConvFusion, BadBiasIsInvalidArgumentNamingIt) {
  register_builtin_ops();
  const OpDef& op = op_registry().get("FusedConv2D");
  const std::vector<Tensor> ins{Tensor::empty(float32, {1, 4, 4, 2}), Tensor::empty(float32, {3, 3, 2, 5}),
                                Tensor::empty(float32, {4})};
  const Attrs attrs{{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")},
                    {"activation", std::string("relu")}};
  InferContext ic(op, ins, attrs);
  try {
    op.infer(ic);
    FAIL() << "a bias of 4 for 5 output channels was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bias must have shape (5,)"), std::string::npos) << e.what();
  }
  const Attrs bad_act{{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")},
                      {"activation", std::string("gelu")}};
  const std::vector<Tensor> good{ins[0], ins[1], Tensor::empty(float32, {5})};
  InferContext ic2(op, good, bad_act);
  EXPECT_THROW(op.infer(ic2), InvalidArgument);
}

}  // namespace
}  // namespace weft
