// libtorch's side of bench/convnets.cpp: the same LeNet-5 and ResNet-20 (see convnet_models.h),
// in libtorch's own layout (NCHW), trained with the same optimizers.
#pragma once

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>

#include <vector>

namespace weft::bench::torch_peer {

inline torch::nn::Sequential lenet5() {
  namespace tn = torch::nn;
  return tn::Sequential(tn::Conv2d(tn::Conv2dOptions(1, 6, 5).padding(2)), tn::ReLU(), tn::MaxPool2d(2),
                        tn::Conv2d(tn::Conv2dOptions(6, 16, 5)), tn::ReLU(), tn::MaxPool2d(2), tn::Flatten(),
                        tn::Linear(16 * 5 * 5, 120), tn::ReLU(), tn::Linear(120, 84), tn::ReLU(), tn::Linear(84, 10));
}

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    namespace tn = torch::nn;
    conv1 = register_module("conv1", tn::Conv2d(tn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", tn::BatchNorm2d(out));
    conv2 = register_module("conv2", tn::Conv2d(tn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", tn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut_conv = register_module("shortcut_conv", tn::Conv2d(tn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut_bn = register_module("shortcut_bn", tn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    auto s = shortcut_conv ? shortcut_bn(shortcut_conv(x)) : x;
    return torch::relu(y + s);
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, shortcut_conv{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, shortcut_bn{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet20Impl : torch::nn::Module {
  ResNet20Impl() {
    namespace tn = torch::nn;
    stem = register_module("stem", tn::Conv2d(tn::Conv2dOptions(3, 16, 3).padding(1).bias(false)));
    stem_bn = register_module("stem_bn", tn::BatchNorm2d(16));
    int64_t in = 16;
    int index = 0;
    for (int64_t channels : {16, 32, 64})
      for (int b = 0; b < 3; ++b) {
        const int64_t stride = (b == 0 && channels != 16) ? 2 : 1;
        blocks.push_back(register_module("block" + std::to_string(index++), BasicBlock(in, channels, stride)));
        in = channels;
      }
    head = register_module("head", tn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(stem_bn(stem(x)));
    for (auto& b : blocks) y = b->forward(y);
    return head(y.mean({2, 3}));
  }
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  std::vector<BasicBlock> blocks;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(ResNet20);

}  // namespace weft::bench::torch_peer
#endif
