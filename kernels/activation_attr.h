// The "activation" attribute that graph fusion (scheduler/passes/fuse_elementwise.cpp) sets on
// FusedBatchNorm, FusedBatchNormGrad and MaxPoolGrad: "" (none) or "relu". The one reader of it
// for the definitions, the CPU kernels and the CUDA kernels, which refuse it (the pass sets it only
// on a graph no GPU may run).
#pragma once

#include <string>

#include "runtime/attr.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace weft {

inline bool relu_activation(const Attrs& attrs) { return attrs.get_or<std::string>("activation", "") == "relu"; }

// For an op's infer function: whether it is "relu"; anything but "" and "relu" fails the node.
inline bool checked_relu_activation(const InferContext& ctx) {
  const std::string a = ctx.attrs().get_or<std::string>("activation", "");
  if (a != "" && a != "relu") ctx.fail("activation must be \"\" or \"relu\", got \"" + a + "\"");
  return a == "relu";
}

// For a CUDA kernel: a node with an activation was placed or edited by hand.
inline void refuse_activation(const KernelContext& ctx) {
  const std::string a = ctx.attrs.get_or<std::string>("activation", "");
  if (!a.empty()) ctx.fail("activation \"" + a + "\" is fused on CPUs only; on CUDA it runs as an op of its own");
}

}  // namespace weft
