// A convolution kernel's problem, read from its node's attributes and the shapes it runs on: the
// one reading the CPU's and CUDA's kernels share. The definitions validated both, so a failure
// here means a graph that bypassed them (a kernel error naming the shapes, never a crash).
#pragma once

#include <string>

#include "kernels/conv_params.h"
#include "runtime/kernel_registry.h"

namespace weft {

// The problem of x [n, h, w, c] under a filter of `f` output channels in `groups` groups.
inline ConvParams kernel_params(const KernelContext& ctx, const Shape& x, const Shape& filter, int64_t f,
                                int64_t groups) {
  ConvWindow win;
  std::string why;
  if (!read_conv_window(ctx.attrs, &win, &why)) ctx.fail(why);
  ConvParams p;
  if (!conv_params(win, x[0], x[1], x[2], x[3], filter[0], filter[1], f, &p))
    ctx.fail("the filter " + filter.to_string() + " does not fit the input " + x.to_string());
  p.groups = groups;
  return p;
}

// Conv2D's family: filter [kh, kw, c, f].
inline ConvParams conv_kernel_params(const KernelContext& ctx, const Shape& x, const Shape& filter) {
  return kernel_params(ctx, x, filter, filter[3], 1);
}

// DepthwiseConv2dNative's family: filter [kh, kw, c, multiplier], c groups.
inline ConvParams depthwise_kernel_params(const KernelContext& ctx, const Shape& x, const Shape& filter) {
  return kernel_params(ctx, x, filter, filter[2] * filter[3], x[3]);
}

// Either reader, as a template argument: the kernels of the two families differ only in it.
using ConvParamsOf = ConvParams (*)(const KernelContext&, const Shape& x, const Shape& filter);

}  // namespace weft
