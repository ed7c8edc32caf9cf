// cuDNN's fused attention ("flash" scaled dot-product attention, through cuDNN's frontend graph
// API) for the float16 and bfloat16 ScaledDotProductAttention and its gradient; weft's own kernels
// (cuda/attention.cu) compute every other case and are the fallback.
//
// Taken only where cuDNN computes the op exactly as kernels/defs/attention.cpp defines it:
//   - no boolean mask and no dropout (weft's dropout mask is its own Philox stream, the same bits
//     on every device and redrawn by AttentionDropoutMask for second-order gradients; cuDNN's
//     would be another);
//   - every query row sees a key (not causal, or Sq <= Sk with the diagonal at the bottom right,
//     weft's alignment): weft defines a row that sees none as zeros, cuDNN does not;
//   - at least 16 query rows: a sampler's one-token steps after its key-value cache (a new cache
//     length, so a new cuDNN plan, at every step) stay on weft's kernel;
//   - cuDNN supports the problem on this GPU (head dimensions, alignment, cuDNN's version: its
//     check_support decides) and, for the gradient, with a deterministic algorithm, so every
//     replica computes the same bits.
// The statistics cuDNN keeps (each row's log-sum-exp of the scaled scores, natural log, float32)
// are weft's lse output, so a forward of one path and a gradient of the other agree.
// WEFT_CUDNN_ATTENTION=0 turns the path off (to compare both on a GPU).
#pragma once

#include <cstdint>
#include <string>

namespace weft {
struct AttentionParams;
struct KernelContext;
}  // namespace weft

namespace weft::cuda {

// Each runs the op's call through cuDNN and returns true, or returns false having queued nothing.
bool cudnn_attention_forward(KernelContext& ctx, const AttentionParams& g);
bool cudnn_attention_backward(KernelContext& ctx, const AttentionParams& g);

// How many calls took cuDNN's path in this process, so tests can see that it is taken, and why
// cuDNN last refused a problem that weft would have given it (empty if it never did).
int64_t cudnn_attention_calls();
std::string cudnn_attention_refusal();

}  // namespace weft::cuda
