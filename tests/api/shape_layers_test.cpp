// Flatten and GlobalAveragePooling2D: shapes, values, names, traced with an unknown batch.
#include <gtest/gtest.h>

#include "weft/weft.h"

namespace weft {
namespace {

class ShapeLayersTest : public ::testing::Test {
 protected:
  void SetUp() override { nn::reset_layer_names(); }
};

TEST_F(ShapeLayersTest, FlattenKeepsTheBatch) {
  nn::Flatten flatten;
  EXPECT_EQ(flatten.name(), "flatten");
  Tensor x = reshape(range(0.f, 48.f), {2, 3, 4, 2});
  Tensor y = flatten(x);
  EXPECT_EQ(y.shape(), (Shape{2, 24}));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(flatten(constant({1.f, 2.f})).shape(), (Shape{2, 1}));
  EXPECT_EQ(flatten(zeros({0, 3, 2})).shape(), (Shape{0, 6}));
  EXPECT_TRUE(flatten.variables().empty());
  EXPECT_THROW(flatten(constant(1.f)), InvalidArgument);
}

TEST_F(ShapeLayersTest, FlattenTracedWithAnUnknownBatch) {
  nn::Flatten flatten;
  auto f = function([&](Tensor x) { return flatten(x); }, {.input_signature = {TensorSpec{float32, {-1, 3, 2, 2}}}});
  for (int64_t n : {1, 4}) {
    Tensor x = reshape(range(0.f, static_cast<float>(12 * n)), {n, 3, 2, 2});
    Tensor y = f(x);
    EXPECT_EQ(y.shape(), (Shape{n, 12}));
    EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  }
  EXPECT_EQ(f.tracing_count(), 1);
  // A known batch with an unknown width works too; both unknown cannot be expressed by one reshape.
  auto g = function([&](Tensor x) { return flatten(x); }, {.input_signature = {TensorSpec{float32, {2, -1}}}});
  EXPECT_EQ(g(zeros({2, 5})).shape(), (Shape{2, 5}));
  auto h = function([&](Tensor x) { return flatten(x); }, {.input_signature = {TensorSpec{float32, {-1, -1, 2}}}});
  EXPECT_THROW(h(zeros({2, 5, 2})), InvalidArgument);
}

TEST_F(ShapeLayersTest, GlobalAveragePoolingAveragesEachImage) {
  nn::GlobalAveragePooling2D gap;
  EXPECT_EQ(gap.name(), "global_average_pooling2d");
  Tensor x = reshape(range(0.0, 24.0), {2, 2, 3, 2});  // image n, channel c: mean of 12n + c + {0, 2, ..., 10}
  Tensor y = gap(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{5, 6, 17, 18}));
  auto f = function([&](Tensor t) { return gap(t); }, {.input_signature = {TensorSpec{float64, {-1, 2, 3, 2}}}});
  EXPECT_EQ(f(x).to_vector<double>(), y.to_vector<double>());
  EXPECT_THROW(gap(zeros({2, 3})), InvalidArgument);
  // Its gradient spreads 1 / (H W) over each image.
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(reduce_sum(gap(x)), x);
  for (double v : g.to_vector<double>()) EXPECT_DOUBLE_EQ(v, 1.0 / 6);
}

}  // namespace
}  // namespace weft
