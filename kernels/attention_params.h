// The problem of one ScaledDotProductAttention (or ...Grad) call, read from its node's attributes
// and inputs: the one reading the CPU's and CUDA's kernels share (kernels/defs/attention.cpp
// validated the shapes). Plain data, so CUDA kernels take it by value.
#pragma once

#include <cstdint>

#include "kernels/philox.h"  // WEFT_HOST_DEVICE
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft {

struct AttentionParams {
  int64_t batch = 0, heads = 0, sq = 0, sk = 0, d = 0, dv = 0;
  double scale = 1;
  bool causal = false;
  double dropout = 0;
  // The dropout mask's Philox key, read by the kernel from input `seed_input` (in host or device
  // memory, which only the kernel knows); -1 without dropout.
  uint64_t seed = 0;
  int seed_input = -1;
  const bool* mask = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // per [batch, heads, q, k]; 0 where the mask broadcasts

  // The last key query row i sees: causal masking is aligned to the bottom right (a query block
  // after a key-value cache sees all of it); without it, every key.
  WEFT_HOST_DEVICE int64_t last_key(int64_t i) const {
    const int64_t last = causal ? i + sk - sq : sk - 1;
    return last < sk - 1 ? last : sk - 1;
  }
  // Whether the mask keeps key j for row i of head bh (batch * heads + head); no mask keeps all.
  WEFT_HOST_DEVICE bool mask_keeps(int64_t bh, int64_t i, int64_t j) const {
    if (!mask) return true;
    const int64_t b = bh / heads, h = bh % heads;
    return mask[b * mask_stride[0] + h * mask_stride[1] + i * mask_stride[2] + j * mask_stride[3]];
  }
};

// q is input `first` (k and v follow it); the optional mask and seed follow from input `extra` on.
inline AttentionParams attention_params(const KernelContext& ctx, int first, int extra) {
  AttentionParams g;
  const Shape& q = ctx.input(first).shape();
  const Shape& v = ctx.input(first + 2).shape();
  g.batch = q[0];
  g.heads = q[1];
  g.sq = q[2];
  g.d = q[3];
  g.sk = v[2];
  g.dv = v[3];
  g.scale = ctx.attrs.get<double>("scale");
  g.causal = ctx.attrs.get<bool>("causal");
  g.dropout = ctx.attrs.get_or<double>("dropout", 0.0);
  int next = extra;
  if (ctx.attrs.get_or<bool>("has_mask", false)) {
    const Tensor& m = ctx.input(next++);
    g.mask = static_cast<const bool*>(raw_data(m));
    const int64_t r = m.shape().rank();
    int64_t stride = 1;
    for (int64_t d = r - 1; d >= 0; --d) {
      g.mask_stride[4 - r + d] = m.shape()[d] == 1 ? 0 : stride;
      stride *= m.shape()[d];
    }
  }
  if (g.dropout > 0) g.seed_input = next;
  return g;
}

// AttentionDropoutMask(q, k, seed): the shape of its [B, H, Sq, Sk] mask and the rate; the seed is
// for the kernel to read (from host or device memory).
inline AttentionParams dropout_mask_params(const KernelContext& ctx) {
  AttentionParams g;
  const Shape& q = ctx.input(0).shape();
  g.batch = q[0];
  g.heads = q[1];
  g.sq = q[2];
  g.sk = ctx.input(1).shape()[2];
  g.dropout = ctx.attrs.get<double>("dropout");
  g.seed_input = 2;
  return g;
}

}  // namespace weft
