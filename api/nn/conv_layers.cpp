// Conv2D, DepthwiseConv2D, MaxPool2D, AvgPool2D and BatchNormalization (api/nn/conv_layers.h), on the ops of
// api/ops/conv.h, pooling.h and normalization.h.
#include "api/nn/conv_layers.h"

#include <cctype>
#include <cmath>

#include "api/distribute/replica_context.h"
#include "api/graph_builder.h"
#include "api/nn/dtype_policy.h"
#include "api/nn/layer_util.h"
#include "api/ops/array.h"
#include "api/ops/conv.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/normalization.h"
#include "api/ops/pooling.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"

namespace weft::nn {

namespace {

using detail::activate;
using detail::called_at;

std::string pair_string(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// Two positive values, {height, width}; `what` names the argument in the error.
void check_pair(const char* layer, const char* what, const std::vector<int64_t>& v) {
  if (v.size() != 2 || v[0] <= 0 || v[1] <= 0)
    throw InvalidArgument(std::string("[") + layer + "] " + what + " must be two positive values {height, width}, got " +
                          pair_string(v));
}

// Keras spells padding in lower case, TensorFlow's ops in upper case: both are accepted.
std::string checked_padding(const char* layer, const std::string& padding) {
  std::string p = padding;
  for (char& c : p) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (p != "VALID" && p != "SAME")
    throw InvalidArgument(std::string("[") + layer + "] padding must be \"valid\" or \"same\", got \"" + padding + "\"");
  return p;
}

void check_images(const char* layer, const std::string& name, const Tensor& x, const SourceLocation& loc) {
  if (x.rank() != 4)
    throw InvalidArgument(std::string("[") + layer + "] " + name + " needs NHWC inputs of rank 4, got shape " +
                          x.shape().to_string() + called_at(loc));
}

// Conv2D's and DepthwiseConv2D's layer: the same checks, building and call, on conv2d with a
// [kh, kw, in, filters] kernel or on depthwise_conv2d with a [kh, kw, in, multiplier] one.
class Conv2DImpl final : public ModuleImpl {
 public:
  // `width`: the filters, or the depth multiplier of a depthwise layer.
  Conv2DImpl(bool depthwise, int64_t width, std::vector<int64_t> kernel_size, Conv2DOptions o)
      : ModuleImpl(unique_layer_name(depthwise ? "depthwise_conv2d" : "conv2d"),
                   depthwise ? "depthwise_conv2d" : "conv2d"),
        depthwise_(depthwise), width_(width), kernel_size_(std::move(kernel_size)), o_(std::move(o)) {
    if (width <= 0)
      throw InvalidArgument(std::string("[") + layer() + "] " + (depthwise ? "depth_multiplier" : "filters") +
                            " must be positive, got " + std::to_string(width));
    check_pair(layer(), "kernel_size", kernel_size_);
    check_pair(layer(), "strides", o_.strides);
    check_pair(layer(), "dilations", o_.dilations);
    padding_ = checked_padding(layer(), o_.padding);
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override {
    check_images(layer(), name(), x, loc);
    const int64_t in = x.shape()[3];
    if (in < 0)
      throw InvalidArgument(std::string("[") + layer() + "] " + name() + " needs a known channel count, got shape " +
                            x.shape().to_string() + called_at(loc));
    if (!kernel_.defined()) build(in, x.dtype(), loc);
    if (in != kernel_.shape()[2])
      throw InvalidArgument(std::string("[") + layer() + "] " + name() + " was built for " +
                            std::to_string(kernel_.shape()[2]) + " input channels, got shape " + x.shape().to_string() +
                            called_at(loc));
    const Tensor image = policy_.cast_input(x, loc), kernel = policy_.cast_variable(kernel_.value(loc), loc);
    Tensor y = depthwise_ ? depthwise_conv2d(image, kernel, o_.strides, padding_, o_.dilations, loc)
                          : conv2d(image, kernel, o_.strides, padding_, o_.dilations, loc);
    if (o_.use_bias) y = add(y, policy_.cast_variable(bias_.value(loc), loc), loc);
    return o_.activation ? activate(o_.activation, y, loc) : y;
  }

  Variable kernel_, bias_;

 private:
  const char* layer() const { return depthwise_ ? "DepthwiseConv2D" : "Conv2D"; }

  void build(int64_t in, DType dtype, const SourceLocation& loc) {
    if (!is_floating(dtype))
      throw InvalidArgument(std::string("[") + layer() + "] " + name() + " needs floating-point inputs, got " +
                            std::string(dtype_name(dtype)) + called_at(loc));
    // Glorot uniform over the receptive field, as Keras: fan_in = kh*kw*in, fan_out = kh*kw*width
    // (Keras computes a depthwise kernel's fans from its [kh, kw, in, multiplier] shape alike).
    const int64_t area = kernel_size_[0] * kernel_size_[1];
    const double limit = std::sqrt(6.0 / static_cast<double>(area * in + area * width_));
    dtype = policy_.variable_dtype_for(dtype);
    const char* kernel_name = depthwise_ ? "depthwise_kernel" : "kernel";
    const Tensor initial = random::uniform({kernel_size_[0], kernel_size_[1], in, width_}, -limit, limit, -1, dtype, loc);
    kernel_ = register_variable(kernel_name, Variable(initial, name() + "/" + kernel_name, true, loc));
    const int64_t outputs = depthwise_ ? in * width_ : width_;
    if (o_.use_bias)
      bias_ = register_variable("bias", Variable(zeros({outputs}, dtype, loc), name() + "/bias", true, loc));
  }

  bool depthwise_;
  int64_t width_;
  std::vector<int64_t> kernel_size_;
  DTypePolicy policy_ = dtype_policy();
  Conv2DOptions o_;
  std::string padding_;
};

class PoolImpl final : public ModuleImpl {
 public:
  PoolImpl(bool max, std::vector<int64_t> pool, std::vector<int64_t> strides, const std::string& padding)
      : ModuleImpl(unique_layer_name(max ? "max_pooling2d" : "average_pooling2d"),
                   max ? "max_pooling2d" : "average_pooling2d"),
        max_(max), pool_(std::move(pool)), strides_(strides.empty() ? pool_ : std::move(strides)) {
    check_pair(layer(), "pool_size", pool_);
    check_pair(layer(), "strides", strides_);
    padding_ = checked_padding(layer(), padding);
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool, const SourceLocation& loc) override {
    check_images(layer(), name(), x, loc);
    return max_ ? max_pool2d(x, pool_, strides_, padding_, loc) : avg_pool2d(x, pool_, strides_, padding_, loc);
  }

 private:
  const char* layer() const { return max_ ? "MaxPool2D" : "AvgPool2D"; }
  bool max_;
  std::vector<int64_t> pool_, strides_;
  std::string padding_;
};

class BatchNormImpl final : public ModuleImpl {
 public:
  BatchNormImpl(BatchNormOptions o, bool synchronized)
      : ModuleImpl(unique_layer_name(synchronized ? "sync_batch_normalization" : "batch_normalization"),
                   synchronized ? "sync_batch_normalization" : "batch_normalization"),
        o_(o), synchronized_(synchronized) {
    if (!(o.momentum >= 0 && o.momentum <= 1))
      throw InvalidArgument("[BatchNormalization] momentum must be in [0, 1], got " + std::to_string(o.momentum));
    if (!(o.epsilon > 0)) throw InvalidArgument("[BatchNormalization] epsilon must be positive, got " + std::to_string(o.epsilon));
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x_in, bool training, const SourceLocation& loc) override {
    const Tensor x = policy_.cast_input(x_in, loc);
    if (x.rank() != 4 && x.rank() != 2)
      throw InvalidArgument("[BatchNormalization] " + name() + " needs NHWC (rank 4) or [N, C] (rank 2) inputs, got shape " +
                            x.shape().to_string() + called_at(loc));
    const int64_t c = x.shape()[x.rank() - 1];
    if (c < 0) throw InvalidArgument("[BatchNormalization] " + name() + " needs a known channel count, got shape " +
                                     x.shape().to_string() + called_at(loc));
    if (!moving_mean_.defined()) build(c, x.dtype(), loc);
    if (c != moving_mean_.shape()[0])
      throw InvalidArgument("[BatchNormalization] " + name() + " was built for " + std::to_string(moving_mean_.shape()[0]) +
                            " channels, got shape " + x.shape().to_string() + called_at(loc));
    const Tensor gamma = gamma_.defined() ? gamma_.value(loc) : ones({c}, param_dtype_, loc);
    const Tensor beta = beta_.defined() ? beta_.value(loc) : zeros({c}, param_dtype_, loc);
    if (!training)
      return fused_batch_norm(x, gamma, beta, moving_mean_.value(loc), moving_variance_.value(loc), o_.epsilon, false, loc).y;

    // Set while DataParallel traces a step of several replicas; null otherwise.
    distribute::ReplicaContext* replicas = distribute::current_replica_context();
    if (synchronized_ && replicas) return synchronized_training(x, gamma, beta, c, *replicas, loc);

    BatchNormResult r = fused_batch_norm(x, gamma, beta, Tensor(), Tensor(), o_.epsilon, true, loc);
    // The statistics carry no gradient into the moving averages (they are not trained).
    Tensor mean = stop_gradient(r.batch_mean, loc);
    Tensor var = bessel_corrected(stop_gradient(r.batch_variance, loc), x, c, loc);
    if (replicas) {
      // Every replica normalised by its own shard; all take the same moving statistics.
      std::vector<Tensor> averaged =
          replicas->all_reduce({mean, var}, distribute::ReplicaContext::Reduction::kBatchWeightedMean, loc);
      mean = averaged[0];
      var = averaged[1];
    }
    return with_updates(r.y, [&] { update_moving_statistics(mean, var, loc); }, loc);
  }

  Variable gamma_, beta_, moving_mean_, moving_variance_;

 private:
  // y, after running `update` (which writes the moving statistics). In a TF1 graph, where a
  // Session runs only what its fetches and targets need, y comes out of an Identity that waits
  // for the writes, so every step that computes the layer's output updates its statistics once,
  // as PyTorch's forward does (TensorFlow 1 left that to the user's UPDATE_OPS). Eagerly and in
  // a traced function every write runs anyway.
  template <class Update>
  static Tensor with_updates(const Tensor& y, Update update, const SourceLocation& loc) {
    GraphBuilder* b = current_builder();
    const bool tf1_graph = b && b->mode() == GraphBuilder::Mode::kGraph && !b->nested();
    const size_t first = tf1_graph ? b->side_effects().size() : 0;
    update();
    if (!tf1_graph) return y;
    Tensor out = identity(y, "", loc);
    const auto node = static_cast<int32_t>(out.symbolic_ref()->node_id);
    const std::vector<int32_t>& effects = b->side_effects();
    for (size_t i = first; i < effects.size(); ++i) b->graph().add_control_input(node, effects[i]);
    return out;
  }

  // var * n / (n - 1), n = the values per channel (var itself when n is 1); n comes from the
  // running graph when the batch is unknown until then.
  void update_moving_statistics(const Tensor& mean, const Tensor& var, const SourceLocation& loc) {
    const double m = o_.momentum;
    moving_mean_.assign(add(mul(moving_mean_.value(loc), m, loc), mul(mean, 1 - m, loc), loc), loc);
    moving_variance_.assign(add(mul(moving_variance_.value(loc), m, loc), mul(var, 1 - m, loc), loc), loc);
  }

  // The global batch's statistics from every replica's per-channel sums, sums of squares and
  // count (one all-reduce, differentiable: its gradient is another), then the normalisation
  // composed of ops. E[x^2] - E[x]^2 in the parameters' dtype (float32 for 16-bit x), clamped at 0.
  Tensor synchronized_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t c,
                               distribute::ReplicaContext& replicas, const SourceLocation& loc) {
    const std::vector<int64_t> axes = x.rank() == 4 ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{0};
    const Tensor xs = x.dtype() == param_dtype_ ? x : cast(x, param_dtype_, loc);
    const Tensor count =
        stop_gradient(reshape(div(cast(size_of(x, int64, loc), param_dtype_, loc), static_cast<double>(c), loc), Shape{1}, loc), loc);
    const std::vector<Tensor> sums =
        replicas.all_reduce({reduce_sum(xs, axes, false, loc), reduce_sum(square(xs, loc), axes, false, loc), count},
                            distribute::ReplicaContext::Reduction::kSum, loc);
    const Tensor& n = sums[2];
    const Tensor mean = div(sums[0], n, loc);
    const Tensor var = maximum(sub(div(sums[1], n, loc), square(mean, loc), loc), 0.0, loc);
    Tensor y = add(mul(sub(xs, mean, loc), mul(rsqrt(add(var, o_.epsilon, loc), loc), gamma, loc), loc), beta, loc);
    if (x.dtype() != param_dtype_) y = cast(y, x.dtype(), loc);
    const Tensor unbiased = mul(var, div(n, maximum(sub(n, 1.0, loc), 1.0, loc), loc), loc);
    return with_updates(y, [&] { update_moving_statistics(stop_gradient(mean, loc), stop_gradient(unbiased, loc), loc); },
                        loc);
  }

  Tensor bessel_corrected(const Tensor& var, const Tensor& x, int64_t c, const SourceLocation& loc) const {
    bool known = true;
    int64_t n = 1;
    for (int64_t i = 0; i + 1 < x.rank(); ++i) {
      if (x.shape()[i] < 0) known = false;
      else n *= x.shape()[i];
    }
    if (known) return n > 1 ? mul(var, static_cast<double>(n) / static_cast<double>(n - 1), loc) : var;
    Tensor count = div(cast(size_of(x, int64, loc), param_dtype_, loc), static_cast<double>(c), loc);
    return mul(var, div(count, maximum(sub(count, 1.0, loc), 1.0, loc), loc), loc);
  }

  void build(int64_t c, DType dtype, const SourceLocation& loc) {
    if (!is_floating(dtype))
      throw InvalidArgument("[BatchNormalization] " + name() + " needs floating-point inputs, got " +
                            std::string(dtype_name(dtype)) + called_at(loc));
    // Half-precision inputs keep float32 statistics, as fused_batch_norm requires.
    param_dtype_ = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    if (o_.scale) gamma_ = register_variable("gamma", Variable(ones({c}, param_dtype_, loc), name() + "/gamma", true, loc));
    if (o_.center) beta_ = register_variable("beta", Variable(zeros({c}, param_dtype_, loc), name() + "/beta", true, loc));
    moving_mean_ =
        register_variable("moving_mean", Variable(zeros({c}, param_dtype_, loc), name() + "/moving_mean", false, loc));
    moving_variance_ = register_variable(
        "moving_variance", Variable(ones({c}, param_dtype_, loc), name() + "/moving_variance", false, loc));
  }

  BatchNormOptions o_;
  bool synchronized_ = false;
  DType param_dtype_ = DType::Float32;
  DTypePolicy policy_ = dtype_policy();
};

}  // namespace

Conv2D::Conv2D(int64_t filters, std::vector<int64_t> kernel_size, Conv2DOptions options)
    : Module(std::make_shared<Conv2DImpl>(false, filters, std::move(kernel_size), std::move(options))) {}
Variable Conv2D::kernel() const { return static_cast<Conv2DImpl*>(impl_.get())->kernel_; }
Variable Conv2D::bias() const { return static_cast<Conv2DImpl*>(impl_.get())->bias_; }

DepthwiseConv2D::DepthwiseConv2D(std::vector<int64_t> kernel_size, DepthwiseConv2DOptions options)
    : Module(std::make_shared<Conv2DImpl>(true, options.depth_multiplier, std::move(kernel_size),
                                          Conv2DOptions{.strides = std::move(options.strides),
                                                        .padding = std::move(options.padding),
                                                        .dilations = std::move(options.dilations),
                                                        .activation = std::move(options.activation),
                                                        .use_bias = options.use_bias})) {}
Variable DepthwiseConv2D::depthwise_kernel() const { return static_cast<Conv2DImpl*>(impl_.get())->kernel_; }
Variable DepthwiseConv2D::bias() const { return static_cast<Conv2DImpl*>(impl_.get())->bias_; }

MaxPool2D::MaxPool2D(std::vector<int64_t> pool_size, std::vector<int64_t> strides, std::string padding)
    : Module(std::make_shared<PoolImpl>(true, std::move(pool_size), std::move(strides), padding)) {}
AvgPool2D::AvgPool2D(std::vector<int64_t> pool_size, std::vector<int64_t> strides, std::string padding)
    : Module(std::make_shared<PoolImpl>(false, std::move(pool_size), std::move(strides), padding)) {}

BatchNormalization::BatchNormalization(BatchNormOptions options)
    : Module(std::make_shared<BatchNormImpl>(options, /*synchronized=*/false)) {}
SyncBatchNormalization::SyncBatchNormalization(BatchNormOptions options)
    : BatchNormalization(std::make_shared<BatchNormImpl>(options, /*synchronized=*/true)) {}
Variable BatchNormalization::gamma() const { return static_cast<BatchNormImpl*>(impl_.get())->gamma_; }
Variable BatchNormalization::beta() const { return static_cast<BatchNormImpl*>(impl_.get())->beta_; }
Variable BatchNormalization::moving_mean() const { return static_cast<BatchNormImpl*>(impl_.get())->moving_mean_; }
Variable BatchNormalization::moving_variance() const { return static_cast<BatchNormImpl*>(impl_.get())->moving_variance_; }

}  // namespace weft::nn
