// weft's own depthwise convolutions on the CPU (DepthwiseConv2dNative and its gradients), direct
// loops, reached through conv_reference.h's entry points for a grouped problem: float64 always
// runs here; float32 where oneDNN does not take the problem (conv_onednn.h), and the tests hold
// oneDNN to these results.
//
// p.groups == p.c: input channel ch meets filter columns [ch * M, (ch + 1) * M) of the
// [kh, kw, C * M] filter, M = p.f / p.c.
//
// Bits: each output value is one sum in a fixed order (the window's taps in row-major order; for
// the filter gradient the images, rows and columns in order), and each task owns whole outputs,
// so the results are the same run to run and on any number of threads.
#pragma once

#include "kernels/conv_params.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

// y [n, oh, ow, C * M] from x [n, h, w, C] and filter [kh, kw, C, M].
template <class T>
void depthwise_conv2d_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* filter, T* y);
// dx [n, h, w, C] from filter and dy [n, oh, ow, C * M].
template <class T>
void depthwise_backprop_input_reference(ThreadPool& pool, const ConvParams& p, const T* filter, const T* dy, T* dx);
// dfilter [kh, kw, C, M] from x and dy.
template <class T>
void depthwise_backprop_filter_reference(ThreadPool& pool, const ConvParams& p, const T* x, const T* dy,
                                         T* dfilter);

}  // namespace weft::cpu
