// Flatten, GlobalAveragePooling2D and ReLU: layers without variables that reshape, reduce or
// apply an activation (api/nn/conv_layers.h, layers.h). Apart from conv_layers.cpp, which needs
// the convolution ops.
#include "api/nn/conv_layers.h"
#include "api/nn/layer_util.h"
#include "api/ops/array.h"
#include "api/ops/nn.h"
#include "api/ops/reduce.h"

namespace weft::nn {

namespace {

using detail::called_at;

class FlattenImpl final : public ModuleImpl {
 public:
  FlattenImpl() : ModuleImpl(unique_layer_name("flatten"), "flatten") {}

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override {
    if (x.rank() < 1)
      throw InvalidArgument("[Flatten] " + name() + " needs inputs with a batch axis, got a scalar" + called_at(loc));
    if (x.rank() == 1) return expand_dims(x, 1, loc);
    // reshape takes one -1: the batch when the rest is known (the usual traced case, where only
    // the batch is unknown), else the rest when the batch is known.
    int64_t rest = 1;
    bool rest_known = true;
    for (int64_t i = 1; i < x.rank(); ++i) {
      if (x.shape()[i] < 0) rest_known = false;
      else rest *= x.shape()[i];
    }
    if (rest_known) return reshape(x, Shape{-1, rest}, loc);
    if (x.shape()[0] >= 0) return reshape(x, Shape{x.shape()[0], -1}, loc);
    throw InvalidArgument("[Flatten] " + name() + " needs the batch or every other dimension known, got shape " +
                          x.shape().to_string() + called_at(loc));
  }
};

class GlobalAveragePooling2DImpl final : public ModuleImpl {
 public:
  GlobalAveragePooling2DImpl()
      : ModuleImpl(unique_layer_name("global_average_pooling2d"), "global_average_pooling2d") {}

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override {
    if (x.rank() != 4)
      throw InvalidArgument("[GlobalAveragePooling2D] " + name() + " needs NHWC inputs of rank 4, got shape " +
                            x.shape().to_string() + called_at(loc));
    return reduce_mean(x, {1, 2}, /*keepdims=*/false, loc);
  }
};

class ReLUImpl final : public ModuleImpl {
 public:
  ReLUImpl() : ModuleImpl(unique_layer_name("re_lu"), "re_lu") {}
  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }
  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override { return weft::relu(x, loc); }
};

}  // namespace

ReLU::ReLU() : Module(std::make_shared<ReLUImpl>()) {}
Flatten::Flatten() : Module(std::make_shared<FlattenImpl>()) {}
GlobalAveragePooling2D::GlobalAveragePooling2D() : Module(std::make_shared<GlobalAveragePooling2DImpl>()) {}

}  // namespace weft::nn
