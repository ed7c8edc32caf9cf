// The transformer's layers: token embeddings and multi-head self-attention.
//
//   nn::Embedding tok(vocab_size, 128);             // int32/int64 ids [...] -> [..., 128]
//   Tensor logits = matmul(h, tok.embeddings().value(), false, true);   // weight tying
//   nn::MultiHeadAttention attn(4, 32, {.causal = true, .dropout = 0.1});
//   Tensor y = attn(x, /*training=*/true);          // x [batch, seq, dim] -> [batch, seq, dim]
//   nn::KeyValueCache cache;                        // decoding: one new position per call
//   Tensor y_t = attn(x_t, cache);                  // x_t [batch, 1, dim]; attends to every earlier one
#pragma once

#include <cstdint>

#include "api/nn/module.h"

namespace weft::nn {

class Embedding : public Module {
 public:
  // A [vocab_size, dim] float32 table, uniform in [-0.05, 0.05] as Keras's, made now (so it can be
  // shared before the first call). Ids outside [0, vocab_size) are an InvalidArgument naming them.
  Embedding(int64_t vocab_size, int64_t dim);
  Variable embeddings() const;
};

struct MultiHeadAttentionOptions {
  bool causal = false;
  double dropout = 0.0;  // on the attention probabilities, while training
};

// The keys and values of the positions a MultiHeadAttention has seen while decoding, each
// [batch, heads, seen, key_dim]; empty (undefined tensors) before the first call.
struct KeyValueCache {
  Tensor key, value;
  int64_t length() const { return key.defined() ? key.shape()[2] : 0; }
};

// Self-attention (Keras's MultiHeadAttention with query = value = key): one fused projection of x
// to q, k and v for every head (a Dense of 3 * num_heads * key_dim units, path "qkv"), scaled
// dot-product attention per head (one fused op), and a Dense back to x's width ("output").
// Built on the first call from x's last dim.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options = {});

  using Module::operator();
  // Inference over new positions x [batch, new, dim] that follow the cached ones: their queries
  // attend to the cached keys and values and to their own (causally among themselves when the
  // layer is causal), and their keys and values are appended to `cache`. So generating n tokens
  // one at a time costs O(n) projections instead of the O(n^2) of rerunning the whole prefix.
  // The layer must be built (called once on a full sequence, or restored) or is built here.
  Tensor operator()(const Tensor& x, KeyValueCache& cache,
                    const std::source_location& loc = std::source_location::current()) const;
};

}  // namespace weft::nn
