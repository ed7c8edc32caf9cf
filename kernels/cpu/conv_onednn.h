// The CPU's float32 convolutions on oneDNN (Debian's libdnnl, built on OpenMP).
//
//   if (!onednn_conv2d(pool, p, x, filter, y)) conv2d_reference<float>(pool, p, x, filter, y);
//
// Each returns false, having written nothing, where oneDNN offers only its own slow reference
// implementation for the problem (or none): then weft's reference (conv_reference.h) runs
// instead. Which way a problem goes depends on its shape and the CPU's instruction sets only,
// never on timing.
//
// Layouts: oneDNN's direct JIT kernels, two to six times faster than the im2col and GEMM it runs
// otherwise, read NHWC images but want their filters blocked (OIhw8i8o on AVX2). So a layer with
// fewer than 64 channels in or out runs on weft's images as they are, with the filter (a few KiB)
// reordered per call; a wider layer on oneDNN's blocked images (nChw8c), reordered in and out per
// call as libtorch does from NCHW, on which its kernels run enough faster to pay for that. Where
// the preferred kernel is missing, the other. The choice is oneDNN's dispatch for the problem and
// CPU and the channel counts, never timing. Images of a channel count that is not a multiple of
// oneDNN's block (LeNet's 6) are converted by channel_blocks.h's copies, not oneDNN's generic
// reorder.
//
// No bias and no post-ops: oneDNN's direct kernels start each output's sum from its bias, which
// rounds differently from Conv2D then Add, and a traced function must give its eager run's bits;
// FusedConv2D (conv.cpp) adds its bias and relu in a pass of its own over the output.
//
// Groups: a depthwise convolution (ConvParams::groups = channels) is oneDNN's grouped
// convolution: its filter has the logical dims G, O/G, I/G, kh, kw over weft's bytes in hwigo
// order ([kh, kw, 1, C, M] for a depthwise one).
//
// Primitives: cached per problem for the whole process, not per node in OpDef::prepare as
// DESIGN.md first said: a network's layers repeat shapes (ResNet-20 has 7 identical 16-channel
// convolutions), eager calls have no node to keep state in, and one cache serves both.
//
// Threads: weft's pool's, and no others. Debian builds oneDNN on OpenMP; letting it start its own
// team beside weft's pool put two sets of spinning threads on the same cores (a LeNet step took
// 42 ms that way, 29 ms with OpenMP told to sleep). So oneDNN always runs single-threaded (OpenMP's
// per-thread count set to 1, and the caller's given back), and weft's pool runs the batch in
// chunks of images, each a primitive call of its own, as the pool runs any other kernel's loop.
//
// Bits: the chunks are fixed by the problem's shape alone (at most 32, of at least 4 MFLOP each).
// The forward and input-gradient passes compute each image apart; the filter gradient takes each
// chunk's partial sum and adds them in chunk order. So the results are the same bits run to run
// and on any number of threads (tests/kernels/conv_onednn_test.cpp checks 1, 2 and 3).
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/conv_params.h"
#include "runtime/thread_pool.h"

namespace weft::cpu {

// What FusedConv2D does to the output pixels [first, end) of y (rows of f values): called for
// each chunk of images as soon as its output is written, while it is in cache.
using OutputRows = std::function<void(float* y, int64_t first, int64_t end)>;

bool onednn_conv2d(ThreadPool& pool, const ConvParams& p, const float* x, const float* filter, float* y,
                   const OutputRows& epilogue = {});
bool onednn_conv2d_backprop_input(ThreadPool& pool, const ConvParams& p, const float* filter, const float* dy,
                                  float* dx);
bool onednn_conv2d_backprop_filter(ThreadPool& pool, const ConvParams& p, const float* x, const float* dy,
                                   float* dfilter);

}  // namespace weft::cpu
