// nn::LayerNormalization (api/nn/layer_normalization.h), on the LayerNorm op.
#include "api/nn/layer_normalization.h"

#include <cmath>
#include <string>

#include "api/nn/dtype_policy.h"
#include "api/nn/layer_util.h"
#include "api/ops/creation.h"
#include "api/ops/normalization.h"

namespace weft::nn {

namespace {

using detail::called_at;

class LayerNormImpl final : public ModuleImpl {
 public:
  explicit LayerNormImpl(LayerNormOptions o)
      : ModuleImpl(unique_layer_name("layer_normalization"), "layer_normalization"), o_(o) {
    // layer_norm would refuse it too, but only at the first call; a bad option is the
    // constructor's to report.
    if (!(o.epsilon > 0) || !std::isfinite(o.epsilon))
      throw InvalidArgument("[LayerNormalization] epsilon must be positive and finite, got " +
                            std::to_string(o.epsilon));
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x_in, bool, const SourceLocation& loc) override {
    const Tensor x = policy_.cast_input(x_in, loc);
    if (x.rank() < 1)
      throw InvalidArgument("[LayerNormalization] " + name() + " needs inputs of rank >= 1, got a scalar" +
                            called_at(loc));
    const int64_t d = x.shape()[x.rank() - 1];
    if (d < 0)
      throw InvalidArgument("[LayerNormalization] " + name() + " needs a known last dimension, got shape " +
                            x.shape().to_string() + called_at(loc));
    if (!built_) build(d, x.dtype(), loc);
    if (d != dim_)
      throw InvalidArgument("[LayerNormalization] " + name() + " was built for a last dimension of " +
                            std::to_string(dim_) + ", got shape " + x.shape().to_string() + called_at(loc));
    const Tensor gamma = gamma_.defined() ? gamma_.value(loc) : ones({d}, param_dtype_, loc);
    const Tensor beta = beta_.defined() ? beta_.value(loc) : zeros({d}, param_dtype_, loc);
    return layer_norm(x, gamma, beta, -1, o_.epsilon, loc);
  }

  Variable gamma_, beta_;

 private:
  void build(int64_t d, DType dtype, const SourceLocation& loc) {
    if (!is_floating(dtype))
      throw InvalidArgument("[LayerNormalization] " + name() + " needs floating-point inputs, got " +
                            std::string(dtype_name(dtype)) + called_at(loc));
    // Half-precision inputs keep float32 parameters, as layer_norm requires.
    param_dtype_ = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    if (o_.scale) gamma_ = register_variable("gamma", Variable(ones({d}, param_dtype_, loc), name() + "/gamma", true, loc));
    if (o_.center) beta_ = register_variable("beta", Variable(zeros({d}, param_dtype_, loc), name() + "/beta", true, loc));
    dim_ = d;
    built_ = true;
  }

  LayerNormOptions o_;
  bool built_ = false;
  int64_t dim_ = 0;
  DType param_dtype_ = DType::Float32;
  DTypePolicy policy_ = dtype_policy();
};

}  // namespace

LayerNormalization::LayerNormalization(LayerNormOptions options)
    : Module(std::make_shared<LayerNormImpl>(options)) {}
Variable LayerNormalization::gamma() const { return static_cast<LayerNormImpl*>(impl_.get())->gamma_; }
Variable LayerNormalization::beta() const { return static_cast<LayerNormImpl*>(impl_.get())->beta_; }

}  // namespace weft::nn
