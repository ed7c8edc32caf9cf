// weft's own convolutions on the CPU, written plainly: im2col and one GEMM (kernels/cpu/gemm.h)
// per chunk of images. float64 always runs here; float32 runs here where oneDNN does not take it
// (conv_onednn.h), and the tests hold oneDNN to these results.
//
// Grouped problems (ConvParams::groups > 1) are depthwise ones, the only kind an op makes: they
// go to the direct loops of conv_depthwise_reference.h.
//
// Bits: im2col and col2im are copies and fixed-order sums, and gemm.h's products depend on the
// shape and the pool's thread count only, so the results are the same run to run.
#pragma once

#include "kernels/conv_params.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

// y [n, oh, ow, f] = x [n, h, w, c] (*) filter [kh, kw, c, f].
template <class T>
void conv2d_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* filter, T* y);
// dx [n, h, w, c] from filter and dy [n, oh, ow, f].
template <class T>
void conv2d_backprop_input_reference(ThreadPool& pool, const ConvParams& p, const T* filter, const T* dy, T* dx);
// dfilter [kh, kw, c, f] from x and dy.
template <class T>
void conv2d_backprop_filter_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* dy, T* dfilter);

}  // namespace weft::cpu
