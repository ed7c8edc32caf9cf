#include "api/nn/layers.h"

#include "api/nn/dtype_policy.h"
#include "api/nn/layer_util.h"

#include <cmath>
#include <string>

#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/random.h"
#include "runtime/graph.h"

namespace weft::nn {

Tensor relu(const Tensor& x) { return weft::relu(x); }
Tensor sigmoid(const Tensor& x) { return weft::sigmoid(x); }
Tensor tanh(const Tensor& x) { return weft::tanh(x); }
Tensor gelu(const Tensor& x) { return weft::gelu(x); }
Tensor softmax(const Tensor& x) { return weft::softmax(x); }

namespace detail {

std::string called_at(const SourceLocation& loc) {
  return " (called at " + SourceLoc{loc.file_name(), loc.function_name(), loc.line()}.to_string() + ")";
}

Tensor activate(const Activation& f, const Tensor& y, const SourceLocation& loc) {
  if (const auto* fn = f.target<Tensor (*)(const Tensor&)>()) {
    if (*fn == &relu) return weft::relu(y, loc);
    if (*fn == &sigmoid) return weft::sigmoid(y, loc);
    if (*fn == &tanh) return weft::tanh(y, loc);
    if (*fn == &gelu) return weft::gelu(y, false, loc);
    if (*fn == &softmax) return weft::softmax(y, -1, loc);
  }
  return f(y);
}

}  // namespace detail

namespace {

using detail::activate;
using detail::called_at;

class DenseImpl final : public ModuleImpl {
 public:
  DenseImpl(int64_t units, Activation act, bool use_bias)
      : ModuleImpl(unique_layer_name("dense"), "dense"), units_(units), activation_(std::move(act)), use_bias_(use_bias) {
    if (units <= 0) throw InvalidArgument("[Dense] units must be positive, got " + std::to_string(units));
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override {
    if (x.rank() < 1)
      throw InvalidArgument("[Dense] " + name() + " needs inputs of rank >= 1, got a scalar" + called_at(loc));
    int64_t in = x.shape()[x.rank() - 1];
    if (!kernel_.defined()) build(in, x.dtype(), loc);
    const Tensor input = policy_.cast_input(x, loc);
    const Tensor kernel = policy_.cast_variable(kernel_.value(loc), loc);
    if (in != kernel_.shape()[0])
      throw InvalidArgument("[Dense] " + name() + " was built for inputs with last dimension " +
                            std::to_string(kernel_.shape()[0]) + ", got shape " + x.shape().to_string() +
                            called_at(loc));
    // On the last axis of any rank, like Keras. A matmul of rank >= 2 by a matrix folds the
    // leading dimensions into one GEMM (forward and gradient), and leaves the bias and activation
    // adjacent to it for the fusion pass; only a vector needs reshaping.
    Tensor y;
    if (x.rank() >= 2) {
      y = matmul(input, kernel, false, false, loc);
    } else {
      y = reshape(matmul(reshape(input, {1, in}, loc), kernel, false, false, loc), {units_}, loc);
    }
    if (use_bias_) y = add(y, policy_.cast_variable(bias_.value(loc), loc), loc);
    return activation_ ? activate(activation_, y, loc) : y;
  }

  Variable kernel_, bias_;

 private:
  void build(int64_t in, DType dtype, const SourceLocation& loc) {
    if (!is_floating(dtype))
      throw InvalidArgument("[Dense] " + name() + " needs floating-point inputs, got " +
                            std::string(dtype_name(dtype)) + called_at(loc));
    double limit = std::sqrt(6.0 / static_cast<double>(in + units_));  // Glorot uniform
    dtype = policy_.variable_dtype_for(dtype);
    kernel_ = register_variable(
        "kernel", Variable(random::uniform({in, units_}, -limit, limit, -1, dtype, loc), name() + "/kernel", true, loc));
    if (use_bias_) bias_ = register_variable("bias", Variable(zeros({units_}, dtype, loc), name() + "/bias", true, loc));
  }

  int64_t units_;
  Activation activation_;
  DTypePolicy policy_ = dtype_policy();
  bool use_bias_;
};

class DropoutImpl final : public ModuleImpl {
 public:
  DropoutImpl(double rate, std::optional<int64_t> seed)
      : ModuleImpl(unique_layer_name("dropout"), "dropout"), rate_(rate), seed_(seed) {
    if (!(rate >= 0 && rate < 1)) throw InvalidArgument("[Dropout] rate must be in [0, 1), got " + std::to_string(rate));
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool training, const SourceLocation& loc) override {
    if (!training || rate_ == 0) return x;
    int64_t seed = seed_ ? *seed_ + calls_++ : -1;
    Tensor keep = greater_equal(random::uniform_like(x, 0.0, 1.0, seed, x.dtype(), loc), rate_, loc);
    return where(keep, mul(x, 1.0 / (1.0 - rate_), loc), zeros_like(x, loc), loc);
  }

 private:
  double rate_;
  std::optional<int64_t> seed_;
  int64_t calls_ = 0;
};

// Its layers are registered children named by child_names ("dense", "dense_1", ...), so
// variables, checkpoint paths and deferred restores come from ModuleImpl's defaults.
class SequentialImpl final : public ModuleImpl {
 public:
  explicit SequentialImpl(const std::vector<Module>& layers) : ModuleImpl(unique_layer_name("sequential"), "sequential") {
    for (const Module& m : layers) add(m);
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool training, const SourceLocation& loc) override {
    Tensor y = x;
    for (const Module& m : layers_) y = m(y, training, loc);
    return y;
  }

  void add(const Module& layer) {
    if (!layer.defined()) throw InvalidArgument("[Sequential] got an empty module handle");
    layers_.push_back(layer);
    // child_names is stable under appending: the earlier layers keep their names.
    register_module(child_names(layers_).back(), layer);
  }

  std::vector<Module> layers_;
};

}  // namespace

Dense::Dense(int64_t units, Activation activation, bool use_bias)
    : Module(std::make_shared<DenseImpl>(units, std::move(activation), use_bias)) {}
Variable Dense::kernel() const { return static_cast<DenseImpl*>(impl_.get())->kernel_; }
Variable Dense::bias() const { return static_cast<DenseImpl*>(impl_.get())->bias_; }

Dropout::Dropout(double rate, std::optional<int64_t> seed) : Module(std::make_shared<DropoutImpl>(rate, seed)) {}

Sequential::Sequential(std::initializer_list<Module> layers) : Sequential(std::vector<Module>(layers)) {}
Sequential::Sequential(std::vector<Module> layers) : Module(std::make_shared<SequentialImpl>(layers)) {}
void Sequential::add(const Module& layer) {
  if (!layer.defined()) throw InvalidArgument("[Sequential] cannot add an empty module handle");
  static_cast<SequentialImpl*>(impl_.get())->add(layer);
}
const std::vector<Module>& Sequential::layers() const { return static_cast<SequentialImpl*>(impl_.get())->layers_; }

}  // namespace weft::nn
