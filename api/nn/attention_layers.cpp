// nn::Embedding and nn::MultiHeadAttention.
#include "api/nn/attention_layers.h"

#include <string>
#include <vector>

#include "api/nn/dtype_policy.h"
#include "api/nn/layer_util.h"
#include "api/nn/layers.h"
#include "api/ops/array.h"
#include "api/ops/attention.h"
#include "api/ops/creation.h"
#include "api/ops/random.h"
#include "runtime/error.h"

namespace weft::nn {

namespace {

using detail::called_at;

class EmbeddingImpl final : public ModuleImpl {
 public:
  EmbeddingImpl(int64_t vocab, int64_t dim) : ModuleImpl(unique_layer_name("embedding"), "embedding") {
    if (vocab <= 0 || dim <= 0)
      throw InvalidArgument("[Embedding] vocab_size and dim must be positive, got " + std::to_string(vocab) + " and " +
                            std::to_string(dim));
    table_ = register_variable("embeddings", Variable(random::uniform({vocab, dim}, -0.05, 0.05),
                                                       name() + "/embeddings", true));
  }

  Tensor call(const Tensor& ids, bool training) override { return call_at(ids, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& ids, bool, const SourceLocation& loc) override {
    if (ids.dtype() != DType::Int32 && ids.dtype() != DType::Int64)
      throw InvalidArgument("[Embedding] " + name() + " takes int32 or int64 ids, got " +
                            std::string(dtype_name(ids.dtype())) + " " + ids.shape().to_string() + called_at(loc));
    // Under a mixed policy the rows looked up, not the table, are cast to the compute dtype.
    return policy_.cast_variable(gather(table_.value(loc), ids, 0, loc), loc);
  }

  Variable table_;
  DTypePolicy policy_ = dtype_policy();
};

class MultiHeadAttentionImpl final : public ModuleImpl {
 public:
  MultiHeadAttentionImpl(int64_t heads, int64_t key_dim, MultiHeadAttentionOptions options)
      : ModuleImpl(unique_layer_name("multi_head_attention"), "multi_head_attention"),
        heads_(heads),
        key_dim_(key_dim),
        options_(options) {
    if (heads <= 0 || key_dim <= 0)
      throw InvalidArgument("[MultiHeadAttention] num_heads and key_dim must be positive, got " +
                            std::to_string(heads) + " and " + std::to_string(key_dim));
    if (!(options.dropout >= 0 && options.dropout < 1))
      throw InvalidArgument("[MultiHeadAttention] dropout must be in [0, 1), got " + std::to_string(options.dropout));
  }

  Tensor call(const Tensor& x, bool training) override { return call_at(x, training, SourceLocation::current()); }

  Tensor call_at(const Tensor& x, bool training, const SourceLocation& loc) override {
    const auto [q, k, v] = project(x, training, loc);
    return attend(x, q, k, v, training, loc);
  }

  Tensor call_cached(const Tensor& x, KeyValueCache& cache, const SourceLocation& loc) {
    auto [q, k, v] = project(x, /*training=*/false, loc);
    if (cache.key.defined()) {
      if (cache.key.rank() != 4 || cache.key.shape()[1] != heads_ || cache.key.shape()[3] != key_dim_ ||
          !cache.value.defined() || cache.value.shape() != cache.key.shape())
        throw InvalidArgument("[MultiHeadAttention] " + name() + ": the cache holds keys " +
                              cache.key.shape().to_string() + " and values " +
                              (cache.value.defined() ? cache.value.shape().to_string() : std::string("(none)")) +
                              ", not [batch, " + std::to_string(heads_) + ", seen, " + std::to_string(key_dim_) +
                              "] each" + called_at(loc));
      k = concat({cache.key, k}, 2, loc);
      v = concat({cache.value, v}, 2, loc);
    }
    cache.key = k;
    cache.value = v;
    return attend(x, q, k, v, /*training=*/false, loc);
  }

 private:
  struct Projected {
    Tensor q, k, v;  // [batch, heads, seq, key_dim]
  };
  Projected project(const Tensor& x_in, bool training, const SourceLocation& loc) {
    const Tensor x = policy_.cast_input(x_in, loc);
    if (x.rank() != 3 || x.shape()[2] < 0)
      throw InvalidArgument("[MultiHeadAttention] " + name() + " takes [batch, seq, dim] with a known dim, got " +
                            x.shape().to_string() + called_at(loc));
    const int64_t width = x.shape()[2], seq = x.shape()[1];
    if (!qkv_.defined()) {
      const detail::DTypePolicyScope made_with(policy_);  // the projections take this layer's policy
      qkv_ = register_module("qkv", Dense(3 * heads_ * key_dim_));
      output_ = register_module("output", Dense(width));
    }
    // [batch, seq, 3 * heads * key_dim] -> [3, batch, heads, seq, key_dim] -> q, k, v.
    const Tensor qkv = reshape(qkv_(x, training, loc), {-1, seq, 3, heads_, key_dim_}, loc);
    const std::vector<Tensor> parts = split(transpose(qkv, {2, 0, 3, 1, 4}, loc), 3, 0, loc);
    auto head_major = [&](const Tensor& t) { return reshape(t, {-1, heads_, seq, key_dim_}, loc); };
    return {head_major(parts[0]), head_major(parts[1]), head_major(parts[2])};
  }

  // Causal masking is aligned to the bottom right, so new queries after a cache see all of it.
  Tensor attend(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v, bool training,
                const SourceLocation& loc) {
    const int64_t seq = x.shape()[1];
    const Tensor o = scaled_dot_product_attention(
        q, k, v, {.causal = options_.causal, .dropout = training ? options_.dropout : 0.0}, loc);
    // [batch, heads, seq, key_dim] -> [batch, seq, heads * key_dim] -> the output projection.
    const Tensor merged = reshape(transpose(o, {0, 2, 1, 3}, loc), {-1, seq, heads_ * key_dim_}, loc);
    return output_(merged, training, loc);
  }

 private:
  int64_t heads_, key_dim_;
  MultiHeadAttentionOptions options_;
  DTypePolicy policy_ = dtype_policy();
  Module qkv_, output_;
};

}  // namespace

Embedding::Embedding(int64_t vocab_size, int64_t dim) : Module(std::make_shared<EmbeddingImpl>(vocab_size, dim)) {}
Variable Embedding::embeddings() const { return static_cast<EmbeddingImpl*>(impl_.get())->table_; }

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options)
    : Module(std::make_shared<MultiHeadAttentionImpl>(num_heads, key_dim, options)) {}

Tensor MultiHeadAttention::operator()(const Tensor& x, KeyValueCache& cache, const std::source_location& loc) const {
  return static_cast<MultiHeadAttentionImpl*>(impl_.get())->call_cached(x, cache, loc);
}

}  // namespace weft::nn
