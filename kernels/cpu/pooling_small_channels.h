// MaxPool and MaxPoolGrad on AVX-512 for float32 images of at most 16 channels (LeNet's 6 and
// 16, a ResNet stem's): a window cell's channels are one masked vector, where pooling.cpp's
// portable loops take two or four 4-lane vectors and, for the gradient, scatter each lane's share
// through an array of offsets. Same results, same bits: the first maximum in window order,
// NaN-sticky; the gradient's cells start from +0 and add their window's dy.
//
// Where windows do not overlap (a window no larger than its stride, as 2x2 windows of stride 2),
// each input cell is in at most one window, so the gradient writes each cell once, dy where it
// holds the window's first maximum and +0 elsewhere, with the fused relu's mask applied in the
// same store; overlapping windows add their shares into a cleared image, as pooling.cpp does.
#pragma once

#include <cstdint>

#include "kernels/pooling_window.h"

namespace weft::cpu {

// Whether the loops below take g: an AVX-512 CPU, 1 to 16 channels, an image's cells addressable
// in 32 bits.
bool small_channel_max_pool(const PoolGeometry& g);

// MaxPool's output rows [r0, r1) (row r: image r / out_h, output row r % out_h) of x into y.
void max_pool_rows_small_channels(const PoolGeometry& g, const float* x, float* y, int64_t r0, int64_t r1);

// MaxPoolGrad's dx for images [i0, i1), each wholly written; with `relu`, x is a relu's output
// and each cell of dx is masked by x > 0 as ReluGrad masks.
void max_pool_grad_images_small_channels(const PoolGeometry& g, const float* x, const float* dy, float* dx,
                                         int64_t i0, int64_t i1, bool relu);

}  // namespace weft::cpu
