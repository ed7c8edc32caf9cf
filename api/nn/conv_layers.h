// Keras-like layers for convolutional networks, on NHWC images.
//
//   nn::Sequential model{
//       nn::Conv2D(32, {3, 3}, {.padding = "same", .use_bias = false}),
//       nn::BatchNormalization(),
//       nn::MaxPool2D({2, 2}),
//       nn::Flatten(),
//       nn::Dense(10)};
//   Tensor logits = model(images, /*training=*/true);   // variables built on the first call
//
// Checkpoint paths: "conv2d/kernel", "conv2d/bias", "batch_normalization/gamma", ".../beta",
// ".../moving_mean", ".../moving_variance".
#pragma once

#include <string>
#include <vector>

#include "api/nn/layers.h"

namespace weft::nn {

struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};    // {height, width}
  std::string padding = "valid";            // "valid" or "same" (any case), as conv2d's
  std::vector<int64_t> dilations = {1, 1};  // {height, width}
  Activation activation = nullptr;
  bool use_bias = true;
};

// conv2d(x, kernel) + bias, then the activation. The kernel [kh, kw, in_channels, filters] is
// built on the first call from x's channels (Glorot uniform, as Keras), the bias [filters] zero.
class Conv2D : public Module {
 public:
  Conv2D(int64_t filters, std::vector<int64_t> kernel_size, Conv2DOptions options = {});
  Variable kernel() const;  // undefined before the first call
  Variable bias() const;
};

struct DepthwiseConv2DOptions {
  std::vector<int64_t> strides = {1, 1};    // {height, width}
  std::string padding = "valid";            // "valid" or "same" (any case)
  int64_t depth_multiplier = 1;             // filters per input channel
  std::vector<int64_t> dilations = {1, 1};  // {height, width}
  Activation activation = nullptr;
  bool use_bias = true;
};

// Keras's DepthwiseConv2D (MobileNet's): depthwise_conv2d(x, depthwise_kernel) + bias, then the
// activation; in * depth_multiplier output channels. The kernel [kh, kw, in, depth_multiplier]
// (Glorot uniform, as Keras) and the bias [in * depth_multiplier] are built on the first call.
// Checkpoint paths "depthwise_conv2d/depthwise_kernel", "depthwise_conv2d/bias".
class DepthwiseConv2D : public Module {
 public:
  explicit DepthwiseConv2D(std::vector<int64_t> kernel_size, DepthwiseConv2DOptions options = {});
  Variable depthwise_kernel() const;  // undefined before the first call
  Variable bias() const;
};

// Max / average over pool_size windows; strides default to pool_size, padding "valid".
class MaxPool2D : public Module {
 public:
  explicit MaxPool2D(std::vector<int64_t> pool_size = {2, 2}, std::vector<int64_t> strides = {},
                     std::string padding = "valid");
};
class AvgPool2D : public Module {
 public:
  explicit AvgPool2D(std::vector<int64_t> pool_size = {2, 2}, std::vector<int64_t> strides = {},
                     std::string padding = "valid");
};

// [N, H, W, C] -> [N, C]: the mean over each image.
class GlobalAveragePooling2D : public Module {
 public:
  GlobalAveragePooling2D();
};

// [N, ...] -> [N, prod(...)]; [N] -> [N, 1]. N may be unknown (-1) in a traced graph.
class Flatten : public Module {
 public:
  Flatten();
};

struct BatchNormOptions {
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // a trainable offset beta (zeros); without it, none
  bool scale = true;   // a trainable factor gamma (ones); without it, none
};

// Batch normalisation over the last axis (channels), fused_batch_norm's.
// training = true: normalises by the batch's mean and (biased) variance, and updates the
//   moving statistics: moving = moving * momentum + batch * (1 - momentum). As TF2's Keras
//   (whose fused kernel returns it), the moving variance takes the batch variance with Bessel's
//   correction, var * n / (n - 1), n = the values per channel (N*H*W); the normalisation uses
//   the biased one. The updates are assignments: immediate eagerly, side effects that run with
//   every call of a weft::function.
// training = false: normalises by moving_mean and moving_variance.
// gamma and beta are trainable; moving_mean (zeros) and moving_variance (ones) are not, yet
// variables() lists them, so checkpoints save them. float16 / bfloat16 inputs keep float32
// parameters and statistics.
//
// Under DataParallel, each replica normalises by its own shard's statistics (as TensorFlow's and
// PyTorch's batch norm do by default), and the moving statistics take the replicas' statistics
// averaged, each weighted by its share of the global batch (one all-reduce per layer and step):
// every replica holds the same moving statistics after every step.
class BatchNormalization : public Module {
 public:
  explicit BatchNormalization(BatchNormOptions options = {});
  // Undefined before the first call (gamma / beta also without scale / center).
  Variable gamma() const;
  Variable beta() const;
  Variable moving_mean() const;
  Variable moving_variance() const;

 protected:
  explicit BatchNormalization(std::shared_ptr<ModuleImpl> impl) : Module(std::move(impl)) {}
};

// Batch normalisation by the global batch's statistics under DataParallel (PyTorch's
// SyncBatchNorm, Keras's synchronized=True): each replica's per-channel sums and sums of squares
// and its count go through one all-reduce per layer, and the gradient through another, so
// data-parallel training equals one process's on the same global batch. Outside a data-parallel
// step, and in inference, it is BatchNormalization. Checkpoint paths as BatchNormalization's,
// under "sync_batch_normalization".
class SyncBatchNormalization : public BatchNormalization {
 public:
  explicit SyncBatchNormalization(BatchNormOptions options = {});
};

}  // namespace weft::nn
