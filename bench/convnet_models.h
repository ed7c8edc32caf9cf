// The convolutional networks bench/convnets.cpp times, written as a weft user writes them: LeNet-5
// as an nn::Sequential, ResNet-20 as modules of one's own (register_module).
//
// LeNet-5 (28x28x1): conv 6@5x5 SAME relu, max pool 2, conv 16@5x5 VALID relu, max pool 2,
// dense 120 relu, 84 relu, 10.
// ResNet-20 (He et al., CIFAR, 32x32x3): conv 16@3x3, then 3 stages of 3 basic blocks
// (conv-BN-relu-conv-BN plus the shortcut, then relu) with 16, 32 and 64 channels, the first
// block of stages 2 and 3 striding by 2 with a 1x1 convolution and batch norm on its shortcut
// (Keras's and torchvision's "option B"), global average pooling and a dense 10.
#pragma once

#include <memory>
#include <string>

#include "weft/weft.h"

namespace weft::bench {

inline nn::Sequential lenet5() {
  return nn::Sequential{nn::Conv2D(6, {5, 5}, {.padding = "same", .activation = nn::relu}),
                        nn::MaxPool2D({2, 2}),
                        nn::Conv2D(16, {5, 5}, {.padding = "valid", .activation = nn::relu}),
                        nn::MaxPool2D({2, 2}),
                        nn::Flatten(),
                        nn::Dense(120, nn::relu),
                        nn::Dense(84, nn::relu),
                        nn::Dense(10)};
}

class BasicBlock : public nn::ModuleImpl {
 public:
  BasicBlock(int64_t channels, int64_t stride) : nn::ModuleImpl("basic_block") {
    conv1_ = register_module("conv1", nn::Conv2D(channels, {3, 3}, {.strides = {stride, stride}, .padding = "same", .use_bias = false}));
    bn1_ = register_module("bn1", nn::BatchNormalization());
    conv2_ = register_module("conv2", nn::Conv2D(channels, {3, 3}, {.padding = "same", .use_bias = false}));
    bn2_ = register_module("bn2", nn::BatchNormalization());
    if (stride != 1) {
      shortcut_conv_ = register_module("shortcut_conv", nn::Conv2D(channels, {1, 1}, {.strides = {stride, stride}, .use_bias = false}));
      shortcut_bn_ = register_module("shortcut_bn", nn::BatchNormalization());
    }
  }
  Tensor call(const Tensor& x, bool training) override {
    Tensor y = nn::relu(bn1_(conv1_(x), training));
    y = bn2_(conv2_(y), training);
    Tensor shortcut = shortcut_conv_.defined() ? shortcut_bn_(shortcut_conv_(x), training) : x;
    return nn::relu(y + shortcut);
  }

 private:
  nn::Module conv1_, bn1_, conv2_, bn2_, shortcut_conv_, shortcut_bn_;
};

class ResNet20 : public nn::ModuleImpl {
 public:
  ResNet20() : nn::ModuleImpl("resnet20") {
    stem_ = register_module("stem", nn::Conv2D(16, {3, 3}, {.padding = "same", .use_bias = false}));
    stem_bn_ = register_module("stem_bn", nn::BatchNormalization());
    int index = 0;
    for (int64_t channels : {16, 32, 64})
      for (int b = 0; b < 3; ++b) {
        const int64_t stride = (b == 0 && channels != 16) ? 2 : 1;
        blocks_.push_back(register_module("block" + std::to_string(index++),
                                          nn::Module(std::make_shared<BasicBlock>(channels, stride))));
      }
    pool_ = register_module("pool", nn::GlobalAveragePooling2D());
    head_ = register_module("head", nn::Dense(10));
  }
  Tensor call(const Tensor& x, bool training) override {
    Tensor y = nn::relu(stem_bn_(stem_(x), training));
    for (const nn::Module& block : blocks_) y = block(y, training);
    return head_(pool_(y));
  }

 private:
  nn::Module stem_, stem_bn_, pool_, head_;
  std::vector<nn::Module> blocks_;
};

inline nn::Module resnet20() { return nn::Module(std::make_shared<ResNet20>()); }

}  // namespace weft::bench
