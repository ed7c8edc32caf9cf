// The CPU's float32 convolutions on oneDNN (Debian's libdnnl, built on OpenMP).
//
//   if (!onednn_conv2d(pool, p, x, filter, y)) conv2d_reference<float>(pool, p, x, filter, y);
//
// Each returns false, having written nothing, where oneDNN offers only its own slow reference
// implementation for the problem (or none): then weft's reference (conv_reference.h) runs
// instead. Which way a problem goes depends on its shape and the CPU's instruction sets only,
// never on timing.
//
// Layouts: each primitive is made with its layouts left to oneDNN, which picks its blocked formats
// (nChw8c on AVX2), whose direct JIT kernels are two to six times faster than the im2col and GEMM
// it would run on NHWC; weft's NHWC tensors are reordered into them and the result back, per
// call, as libtorch does from NCHW (a few percent of the convolution's time).
//
// FusedConv2D's epilogue: `bias` (null for none) is the primitive's bias and `relu` an eltwise
// post-op, both applied to each output once its sum is complete, so the result has the bits of
// Conv2D, then the bias Add, then Relu (tests/api/conv_fusion_test.cpp checks it).
//
// Threads: oneDNN's are the CPU device's, never more. Debian builds oneDNN on OpenMP, whose
// thread count is a per-calling-thread setting, so each call sets it on the calling thread to
// the device pool's size (1 when called from inside a pool worker, where weft itself would not
// fan out either) before oneDNN is asked for a primitive or runs one. weft's pool threads sleep
// or spin while a kernel runs on the calling thread, so the busy threads are the pool's count.
//
// Bits: a primitive's work split follows the thread count it was made for, so the cache below
// keys on it. For one thread count the results are the same run to run (oneDNN's direct
// convolutions sum in a fixed order; tests/api/conv_test.cpp checks it); across thread counts
// they may differ in the last bits (the weight gradient's reduction is split by threads).
#pragma once

#include "kernels/conv_params.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

bool onednn_conv2d(ThreadPool& pool, const ConvParams& p, const float* x, const float* filter, float* y,
                   const float* bias = nullptr, bool relu = false);
bool onednn_conv2d_backprop_input(ThreadPool& pool, const ConvParams& p, const float* filter, const float* dy,
                                  float* dx);
bool onednn_conv2d_backprop_filter(ThreadPool& pool, const ConvParams& p, const float* x, const float* dy,
                                   float* dfilter);

}  // namespace weft::cpu
