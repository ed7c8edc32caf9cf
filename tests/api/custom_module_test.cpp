// Models of one's own: ModuleImpl::register_module / register_variable give a hand-written
// module its children's variables, checkpoint paths and deferred restores, in registration order.
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tensor_test_util.h"
#include "weft/weft.h"

namespace weft {
namespace {

// API.md's ResidualBlock, with Dense layers (it only needs x's last dimension to be `channels`).
class ResidualBlock : public nn::ModuleImpl {
 public:
  explicit ResidualBlock(int64_t channels) : nn::ModuleImpl("residual_block") {
    fc1_ = register_module("conv1", nn::Dense(channels, nn::relu));
    fc2_ = register_module("conv2", nn::Dense(channels));
    scale_ = register_variable("scale", Variable(constant(0.5f), "scale"));
  }
  Tensor call(const Tensor& x, bool training) override { return nn::relu(fc2_(fc1_(x, training), training) * scale_ + x); }

 private:
  nn::Module fc1_, fc2_;
  Variable scale_;
};

// A block of blocks: nested paths.
class Tower : public nn::ModuleImpl {
 public:
  Tower() : nn::ModuleImpl("tower") {
    a_ = register_module("block_a", nn::Module(std::make_shared<ResidualBlock>(3)));
    b_ = register_module("block_b", nn::Module(std::make_shared<ResidualBlock>(3)));
  }
  Tensor call(const Tensor& x, bool training) override { return b_(a_(x, training), training); }

 private:
  nn::Module a_, b_;
};

class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("weft_custom_module") {}
};

std::vector<std::string> paths(const nn::NamedVariables& v) {
  std::vector<std::string> out;
  for (auto& [p, var] : v) out.push_back(p);
  return out;
}

class CustomModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::reset_layer_names();
    random::set_seed(5);
  }
  Tensor x_ = random::normal({4, 3}, 0, 1, /*seed=*/21);
};

TEST_F(CustomModuleTest, VariablesFollowTheRegisteredChildrenInOrder) {
  nn::Module block(std::make_shared<ResidualBlock>(3));
  EXPECT_EQ(block.name(), "residual_block");
  // Before the first call only the registered variable exists; the Dense layers build on call.
  EXPECT_EQ(paths(block.named_variables()), (std::vector<std::string>{"scale"}));
  Tensor y = block(x_);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(paths(block.named_variables()),
            (std::vector<std::string>{"scale", "conv1/kernel", "conv1/bias", "conv2/kernel", "conv2/bias"}));
  std::vector<Variable> vars = block.variables();
  ASSERT_EQ(vars.size(), 5u);
  nn::NamedVariables named = block.named_variables();
  for (size_t i = 0; i < vars.size(); ++i) EXPECT_EQ(vars[i].id(), named[i].second.id());
  EXPECT_EQ(block.trainable_variables().size(), 5u);

  nn::Module tower(std::make_shared<Tower>());
  tower(x_);
  std::vector<std::string> p = paths(tower.named_variables());
  ASSERT_EQ(p.size(), 10u);
  EXPECT_EQ(p[0], "block_a/scale");
  EXPECT_EQ(p[1], "block_a/conv1/kernel");
  EXPECT_EQ(p[5], "block_b/scale");
  EXPECT_EQ(p[9], "block_b/conv2/bias");

  // In a Sequential, a custom block is named by its kind like any layer.
  nn::Sequential model{nn::Dense(3), nn::Module(std::make_shared<ResidualBlock>(3))};
  model(x_);
  EXPECT_EQ(paths(model.named_variables()),
            (std::vector<std::string>{"dense/kernel", "dense/bias", "residual_block/scale", "residual_block/conv1/kernel",
                                      "residual_block/conv1/bias", "residual_block/conv2/kernel",
                                      "residual_block/conv2/bias"}));
}

TEST_F(CustomModuleTest, NonTrainableVariablesAreKeptButNotTrained) {
  class WithFrozen : public nn::ModuleImpl {
   public:
    WithFrozen() : nn::ModuleImpl("with_frozen") {
      register_variable("frozen", Variable(constant(2.0f), "frozen", /*trainable=*/false));
      dense_ = register_module("dense", nn::Dense(2));
    }
    Tensor call(const Tensor& x, bool training) override { return dense_(x, training); }
    nn::Module dense_;
  };
  nn::Module m(std::make_shared<WithFrozen>());
  m(x_);
  EXPECT_EQ(m.variables().size(), 3u);
  EXPECT_EQ(m.trainable_variables().size(), 2u);
  EXPECT_EQ(paths(m.named_variables()), (std::vector<std::string>{"frozen", "dense/kernel", "dense/bias"}));
}

TEST_F(CustomModuleTest, BadRegistrationsAreInvalidArguments) {
  class Bad : public nn::ModuleImpl {
   public:
    explicit Bad(int which) : nn::ModuleImpl("bad") {
      register_module("d", nn::Dense(2));
      if (which == 0) register_module("d", nn::Dense(2));
      if (which == 1) register_module("a/b", nn::Dense(2));
      if (which == 2) register_module("", nn::Dense(2));
      if (which == 3) register_module("e", nn::Module());
      if (which == 4) register_variable("d", Variable(constant(1.0f)));
    }
    Tensor call(const Tensor& x, bool) override { return x; }
  };
  for (int which = 0; which < 5; ++which)
    EXPECT_THROW((void)std::make_shared<Bad>(which), InvalidArgument) << which;
}

TEST_F(CustomModuleTest, CheckpointRoundTrip) {
  TempDir dir;
  nn::Module block(std::make_shared<ResidualBlock>(3));
  Tensor want = block(x_);
  Checkpoint ckpt({{"block", block}});
  std::vector<std::string> saved;
  for (auto& [p, v] : ckpt.variables()) saved.push_back(p);
  EXPECT_EQ(saved, (std::vector<std::string>{"block/scale", "block/conv1/kernel", "block/conv1/bias",
                                             "block/conv2/kernel", "block/conv2/bias"}));
  ckpt.save(dir.file("block.safetensors"));

  // Into a block that is already built: immediate.
  nn::Module other(std::make_shared<ResidualBlock>(3));
  other(x_);
  EXPECT_NE(other(x_).to_vector<float>(), want.to_vector<float>());
  RestoreReport r = Checkpoint({{"block", other}}).restore(dir.file("block.safetensors"));
  EXPECT_EQ(r.restored.size(), 5u);
  EXPECT_TRUE(r.deferred.empty());
  EXPECT_EQ(other(x_).to_vector<float>(), want.to_vector<float>());
}

TEST_F(CustomModuleTest, DeferredRestoreBeforeTheFirstCall) {
  TempDir dir;
  nn::Module tower(std::make_shared<Tower>());
  Tensor want = tower(x_);
  Checkpoint({{"model", tower}}).save(dir.file("tower.safetensors"));

  nn::Module later(std::make_shared<Tower>());
  RestoreReport r = Checkpoint({{"model", later}}).restore(dir.file("tower.safetensors"));
  // The scales exist from construction and are set now; the Dense variables wait for the call.
  EXPECT_EQ(r.restored, (std::vector<std::string>{"model/block_a/scale", "model/block_b/scale"}));
  EXPECT_EQ(r.deferred.size(), 8u);
  EXPECT_EQ(later(x_).to_vector<float>(), want.to_vector<float>());
  nn::NamedVariables a = tower.named_variables(), b = later.named_variables();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.value().to_vector<float>(), b[i].second.value().to_vector<float>()) << a[i].first;
  }
}

}  // namespace
}  // namespace weft
