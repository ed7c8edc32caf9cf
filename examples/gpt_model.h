// A GPT (decoder-only transformer) built from weft's layers, as nanoGPT writes it: token and
// learned position embeddings, pre-norm blocks of causal self-attention and a GELU MLP, a final
// layer norm, and the output layer tied to the token embeddings. Used by examples/train_gpt.cpp
// and by bench/transformers.cpp (the same model the benchmark times is the one users train).
//
//   gpt::Config config = gpt::Config::cpu(vocab_size);      // nanoGPT's CPU configuration
//   gpt::Gpt model(config);
//   Tensor logits = model(ids, /*training=*/true);           // int32 [batch, seq] -> [batch, seq, vocab]
//   std::vector<nn::KeyValueCache> caches(config.layers);   // generation, one position per call:
//   Tensor next = model.decode(last_ids, caches);            // [batch, new] -> [batch, new, vocab]
#pragma once

#include <weft/weft.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpt {

using namespace weft;

struct Config {
  int64_t vocab_size = 65;
  int64_t block_size = 64;  // the longest context
  int64_t layers = 4, heads = 4, width = 128;
  double dropout = 0.0;
  int64_t batch = 12;  // the training batch these sizes go with

  // nanoGPT's README configuration for training on a CPU.
  static Config cpu(int64_t vocab_size) { return {vocab_size, 64, 4, 4, 128, 0.0, 12}; }
  // nanoGPT's config/train_shakespeare_char.py, for a GPU.
  static Config gpu(int64_t vocab_size) { return {vocab_size, 256, 6, 6, 384, 0.2, 64}; }
};

// x + attention(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public nn::ModuleImpl {
 public:
  explicit Block(const Config& c)
      : nn::ModuleImpl("block"), attention_(c.heads, c.width / c.heads, {.causal = true, .dropout = c.dropout}) {
    ln_1_ = register_module("ln_1", nn::LayerNormalization({.epsilon = 1e-5}));
    register_module("attention", attention_);
    ln_2_ = register_module("ln_2", nn::LayerNormalization({.epsilon = 1e-5}));
    fc_ = register_module("fc", nn::Dense(4 * c.width, nn::gelu));
    projection_ = register_module("projection", nn::Dense(c.width));
    dropout_ = register_module("dropout", nn::Dropout(c.dropout));  // on each residual branch
  }

  Tensor call(const Tensor& x, bool training) override {
    const Tensor h = x + dropout_(attention_(ln_1_(x), training), training);
    return h + dropout_(projection_(fc_(ln_2_(h))), training);
  }

  // Inference over new positions after those in `cache`.
  Tensor decode(const Tensor& x, nn::KeyValueCache& cache) {
    const Tensor h = x + attention_(ln_1_(x), cache);
    return h + projection_(fc_(ln_2_(h)));
  }

 private:
  nn::MultiHeadAttention attention_;  // kept as its own type for the decoding call
  nn::Module ln_1_, ln_2_, fc_, projection_, dropout_;
};

class GptImpl : public nn::ModuleImpl {
 public:
  explicit GptImpl(const Config& c)
      : nn::ModuleImpl("gpt"),
        config_(c),
        token_(c.vocab_size, c.width),
        position_(c.block_size, c.width) {
    if (c.width % c.heads != 0)
      throw InvalidArgument("gpt: width " + std::to_string(c.width) + " is not a multiple of heads " +
                            std::to_string(c.heads));
    register_module("token_embedding", token_);
    register_module("position_embedding", position_);
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks_.push_back(std::make_shared<Block>(c));
      register_module("block_" + std::to_string(i), nn::Module(blocks_.back()));
    }
    ln_f_ = register_module("ln_f", nn::LayerNormalization({.epsilon = 1e-5}));
  }

  // ids int32 [batch, seq], seq <= block_size -> logits [batch, seq, vocab].
  Tensor call(const Tensor& ids, bool training) override {
    Tensor x = embed(ids, 0);
    for (auto& block : blocks_) x = nn::Module(block)(x, training);
    return logits(x);
  }

  // ids of the positions after those the caches hold (one cache per block).
  Tensor decode(const Tensor& ids, std::vector<nn::KeyValueCache>& caches) {
    if (caches.size() != blocks_.size())
      throw InvalidArgument("gpt: decode takes one cache per block (" + std::to_string(blocks_.size()) + "), got " +
                            std::to_string(caches.size()));
    Tensor x = embed(ids, caches[0].length());
    for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->decode(x, caches[i]);
    return logits(x);
  }

  const Config& config() const { return config_; }

 private:
  // Token embeddings plus the position embeddings of positions start, start + 1, ...
  Tensor embed(const Tensor& ids, int64_t start) {
    const int64_t seq = ids.shape()[1];
    if (seq < 0 || start + seq > config_.block_size)
      throw InvalidArgument("gpt: positions " + std::to_string(start) + " to " + std::to_string(start + seq) +
                            " are outside the context of " + std::to_string(config_.block_size));
    const Tensor tokens = token_(ids);  // in the layers' compute dtype (bfloat16 under mixed_bfloat16)
    return tokens + cast(slice(position_.embeddings().value(), {start, 0}, {seq, -1}), tokens.dtype());
  }

  // The output layer is the token embedding table, transposed (weight tying).
  Tensor logits(const Tensor& x) {
    const Tensor h = ln_f_(x);
    const int64_t seq = h.shape()[1];
    const Tensor flat = reshape(h, {-1, config_.width});
    const Tensor table = cast(token_.embeddings().value(), flat.dtype());
    return reshape(matmul(flat, table, false, true), {-1, seq, config_.vocab_size});
  }

  Config config_;
  nn::Embedding token_, position_;
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Module ln_f_;
};

class Gpt : public nn::Module {
 public:
  explicit Gpt(const Config& c) : nn::Module(std::make_shared<GptImpl>(c)) {}
  using nn::Module::operator();
  Tensor decode(const Tensor& ids, std::vector<nn::KeyValueCache>& caches) const { return impl().decode(ids, caches); }
  const Config& config() const { return impl().config(); }

 private:
  GptImpl& impl() const { return *static_cast<GptImpl*>(impl_.get()); }
};

// The mean cross-entropy of predicting `targets` (int32 [batch, seq]) from `logits`.
inline Tensor loss(const Tensor& logits, const Tensor& targets) {
  const int64_t vocab = logits.shape()[2];
  return nn::sparse_softmax_cross_entropy(reshape(targets, {-1}), reshape(logits, {-1, vocab}));
}

// nanoGPT's optimizer: AdamW with betas 0.9 / 0.99 and weight decay 0.1 on the matrices only.
inline optim::AdamW adamw(const optim::LearningRate& learning_rate) {
  optim::AdamW optimizer(learning_rate, /*weight_decay=*/0.1, /*beta1=*/0.9, /*beta2=*/0.99, /*epsilon=*/1e-8);
  optimizer.exclude_from_weight_decay({"bias", "gamma", "beta"});
  return optimizer;
}

struct StepResult {
  Tensor loss, gradient_norm;  // the norm before clipping
};

// One training step: forward, backward, the gradients clipped to a global norm of 1, the update.
// Under DataParallel each replica clips its own gradients before apply_gradients averages them
// (as a TensorFlow custom loop under MirroredStrategy does); in one process it is nanoGPT's step.
inline StepResult train_step(const Gpt& model, optim::Optimizer& optimizer, const Tensor& ids, const Tensor& targets) {
  GradientTape tape;
  Tensor l = loss(model(ids, /*training=*/true), targets);
  std::vector<Variable> vars = model.trainable_variables();
  auto [grads, norm] = clip_by_global_norm(tape.gradient(l, vars), 1.0);
  optimizer.apply_gradients(grads, vars);
  return {l, norm};
}

// The same step under mixed_float16, with dynamic loss scaling: the loss scaled before
// differentiating, the gradients unscaled, clipped to a global norm of 1 and applied, or the
// step skipped and the scale halved when they overflowed (their norm, returned, is then inf or
// NaN; clipping leaves them NaN, which the optimizer's check sees). Under DataParallel
// unscale_gradients all-reduces the gradients first, so the clipping here is of the global
// gradient, the same on every replica (PyTorch DistributedDataParallel's order), not of each
// replica's as in the step above.
inline StepResult train_step(const Gpt& model, optim::LossScaleOptimizer& optimizer, const Tensor& ids,
                             const Tensor& targets) {
  GradientTape tape;
  Tensor l = loss(model(ids, /*training=*/true), targets);
  std::vector<Variable> vars = model.trainable_variables();
  const std::vector<Tensor> grads = optimizer.unscale_gradients(tape.gradient(optimizer.scale_loss(l), vars), vars);
  auto [clipped, norm] = clip_by_global_norm(grads, 1.0);
  optimizer.apply_unscaled_gradients(clipped, vars);
  return {l, norm};
}

}  // namespace gpt
