// A pooling kernel's geometry, read from its node and the shapes it runs on: the one reading the
// CPU's and CUDA's kernels share (the attributes themselves: kernels/pooling_window.h).
#pragma once

#include <string>
#include <vector>

#include "kernels/pooling_window.h"
#include "runtime/kernel_registry.h"

namespace weft {

// The geometry over the NHWC input `nhwc`; a kernel error when the node's attributes do not fit.
inline PoolGeometry pool_kernel_geometry(const KernelContext& c, const std::vector<int64_t>& nhwc) {
  PoolGeometry g;
  std::string error;
  if (!pool_geometry(c.attrs, nhwc, &g, &error)) c.fail(error);
  return g;
}

// AvgPoolGrad(dy[, x]): the forward input's sizes from "input_sizes", whose unknown (-1) entries
// come from x when the node has it (a trace with unknown dims), else the batch and channels from
// dy; then the geometry, checked against dy.
inline PoolGeometry avg_pool_grad_geometry(const KernelContext& c) {
  std::vector<int64_t> sizes = c.attrs.get<std::vector<int64_t>>("input_sizes");
  const Shape& dy = c.input(0).shape();
  if (c.inputs.size() == 2 && sizes.size() == 4 && c.input(1).shape().rank() == 4)
    for (size_t i = 0; i < 4; ++i)
      if (sizes[i] < 0) sizes[i] = c.input(1).shape()[static_cast<int64_t>(i)];
  if (sizes.size() == 4 && sizes[0] < 0) sizes[0] = dy[0];
  if (sizes.size() == 4 && sizes[3] < 0) sizes[3] = dy[3];
  for (int64_t s : sizes)
    if (s < 0) c.fail("input_sizes " + pool_int_list(sizes) + " must be known when the gradient runs");
  const PoolGeometry g = pool_kernel_geometry(c, sizes);
  if (g.out_h != dy[1] || g.out_w != dy[2] || g.n != dy[0] || g.c != dy[3])
    c.fail("the gradient dy " + dy.to_string() + " does not match input_sizes " + pool_int_list(sizes));
  return g;
}

}  // namespace weft
