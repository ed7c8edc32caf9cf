// Scaled dot-product attention as one op (its gradient one op too).
//
//   // q, k, v: [batch, heads, seq, head_dim]; the result has q's shape (v's head_dim).
//   Tensor o = scaled_dot_product_attention(q, k, v, {.causal = true});
//   Tensor o = scaled_dot_product_attention(q, k, v, {.mask = keep, .dropout = 0.1, .seed = 7});
//
// softmax(q k^T scale + bias) v, bias -inf where the mask is false or, when causal, above the
// diagonal. Causal aligns the diagonal to the bottom right: query i of Sq sits at key position
// i + Sk - Sq (equal lengths: the usual lower triangle; a new query block after a key-value cache
// sees the whole cache and itself causally). A query row that sees no key gives zeros. The CPU
// kernel never forms the Sq x Sk matrix (kernels/cpu/attention.cpp).
#pragma once

#include <optional>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

struct AttentionOptions {
  bool causal = false;
  Tensor mask;                   // bool, true = keep; broadcasts to [batch, heads, q_seq, k_seq]
  std::optional<double> scale;   // default 1 / sqrt(head_dim)
  double dropout = 0.0;          // on the probabilities, in [0, 1); pass it while training only
  std::optional<int64_t> seed;   // the dropout mask's; without one, each call draws a new mask
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {},
                                    const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
